import { randomBytes } from 'node:crypto';
import { parseKey } from '@tollgate/platform';
import { TEST_ADMIN_TOKEN } from '../support/env';
import { call, createProject, stepEvent, type Reply } from '../support/http';
import { startService, type RunningService } from '../support/service';

/**
 * Failed authentication is throttled per client address and per key id (every request here comes
 * from 127.0.0.1). The window is long in these tests so that no failure is forgiven while a test
 * runs: the counts below are exact. Each test has its own service, hence its own Redis counters.
 */
const LIMITS = { AUTH_FAILURES_PER_ADDRESS: '30', AUTH_FAILURES_PER_KEY: '10', AUTH_FAILURE_WINDOW_MS: '600000' };
const WRONG_ADMIN = 'wrong-admin-token-0123456789';
/** 600 s / 30 failures: one more failure from the address is allowed every 20 s. */
const ADDRESS_INTERVAL_S = 20;
const KEY_INTERVAL_S = 60;

const statuses = (replies: Reply[]) => replies.map((r) => r.status);
const wrongSecret = (keyId: string) => `tg_${keyId}_${randomBytes(32).toString('base64url')}`;
const unknownKey = () => `tg_${randomBytes(8).toString('hex')}_${randomBytes(32).toString('base64url')}`;

async function times(n: number, send: (i: number) => Promise<Reply>): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < n; i++) replies.push(await send(i));
  return replies;
}

function expectThrottled(r: Reply, maxRetryAfter: number) {
  expect(r.status).toBe(429);
  expect(r.body).toMatchObject({ statusCode: 429, code: 'rate_limited', field: 'authorization' });
  const retryAfter = Number(r.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= maxRetryAfter).toBe(true);
}

describe('failed authentication is throttled', () => {
  const services: RunningService[] = [];
  const start = async (env: Record<string, string> = {}) => {
    const svc = await startService({ ...LIMITS, ...env });
    services.push(svc);
    return svc;
  };
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
  });

  it('60 wrong admin tokens from one address: 30 × 401, then 429 with Retry-After (even the right token, from that address)', async () => {
    const svc = await start();
    const p = await createProject(svc.url, ['read']);
    const replies = await times(60, () =>
      call(svc.url, 'POST', '/v1/admin/projects', { token: WRONG_ADMIN, body: { name: 'x' } }),
    );
    expect(statuses(replies)).toEqual([...Array(30).fill(401), ...Array(30).fill(429)]);
    for (const r of replies.slice(30)) expectThrottled(r, ADDRESS_INTERVAL_S);
    // A guessable secret is not compared while its guesser is throttled: the right token waits too.
    expectThrottled(
      await call(svc.url, 'POST', '/v1/admin/projects', { token: TEST_ADMIN_TOKEN, body: { name: 'x' } }),
      ADDRESS_INTERVAL_S,
    );
    // A project key from the same address is never slowed by the failures.
    expect((await call(svc.url, 'GET', '/v1/policies', { token: p.key })).status).toBe(200);
  });

  it('60 wrong secrets for a real key id: 10 × 401, then 429; the key itself keeps working and never counts', async () => {
    const svc = await start();
    const p = await createProject(svc.url, ['read', 'ingest']);
    const { id } = parseKey(p.key)!;
    const replies = await times(60, (i) =>
      i % 10 === 5
        ? call(svc.url, 'GET', '/v1/policies', { token: p.key })
        : call(svc.url, 'GET', '/v1/policies', { token: wrongSecret(id) }),
    );
    // Every 10th request (i = 5, 15, …) was the valid key, interleaved with the attack.
    const valid = replies.filter((_, i) => i % 10 === 5);
    const wrong = replies.filter((_, i) => i % 10 !== 5);
    expect(statuses(valid)).toEqual(Array(6).fill(200));
    expect(statuses(wrong)).toEqual([...Array(10).fill(401), ...Array(44).fill(429)]);
    for (const r of wrong.slice(10)) expectThrottled(r, KEY_INTERVAL_S);
    // 100 more valid requests and an ingest: none waits on, none counts against the throttle.
    expect(new Set(statuses(await times(100, () => call(svc.url, 'GET', '/v1/policies', { token: p.key }))))).toEqual(
      new Set([200]),
    );
    expect(
      (await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent()] } })).body.accepted,
    ).toBe(1);
    // The address has 10 failures (the key id's); it allows 20 more, for any other key id.
    expect(statuses(await times(21, () => call(svc.url, 'GET', '/v1/policies', { token: unknownKey() })))).toEqual([
      ...Array(20).fill(401),
      429,
    ]);
  });

  it('40 unknown key ids and malformed keys from one address: 30 × 401, then 429', async () => {
    const svc = await start();
    const replies = await times(40, (i) =>
      call(svc.url, 'GET', '/v1/policies', { token: i % 2 ? unknownKey() : `not-a-key-${i}` }),
    );
    expect(statuses(replies)).toEqual([...Array(30).fill(401), ...Array(10).fill(429)]);
    for (const r of replies.slice(30)) expectThrottled(r, ADDRESS_INTERVAL_S);
    // A missing header is not a guess: it is still answered 401.
    expect((await call(svc.url, 'GET', '/v1/policies')).status).toBe(401);
  });

  it('counts failures in Redis: two API replicas share one count', async () => {
    const prefix = `tollgate-authfail-${randomBytes(4).toString('hex')}`;
    const [one, two] = await Promise.all([start({ QUEUE_PREFIX: prefix }), start({ QUEUE_PREFIX: prefix })]);
    const replies = await times(40, (i) =>
      call(i % 2 ? two.url : one.url, 'POST', '/v1/admin/projects', { token: WRONG_ADMIN, body: { name: 'x' } }),
    );
    expect(statuses(replies)).toEqual([...Array(30).fill(401), ...Array(10).fill(429)]);
  });

  it('falls back to a count in the process when Redis is down: still throttled, valid keys still pass', async () => {
    const main = await start();
    const p = await createProject(main.url, ['ingest']);
    const noRedis = await start({ REDIS_URL: 'redis://127.0.0.1:1' });
    const replies = await times(40, () =>
      call(noRedis.url, 'POST', '/v1/admin/projects', { token: WRONG_ADMIN, body: { name: 'x' } }),
    );
    expect(statuses(replies)).toEqual([...Array(30).fill(401), ...Array(10).fill(429)]);
    const wrong = await times(15, () =>
      call(noRedis.url, 'POST', '/v1/events', { token: wrongSecret(p.keyId), body: { events: [stepEvent()] } }),
    );
    expect(new Set(statuses(wrong))).toEqual(new Set([429]));
    const res = await call(noRedis.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent()] } });
    expect([res.status, res.body.accepted]).toEqual([200, 1]);
  });
});
