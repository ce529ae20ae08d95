import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import { join } from 'node:path';
import { hashSecret, parseKey } from '@tollgate/platform';
import { TEST_ADMIN_TOKEN, TEST_DATABASE_URL, TEST_REDIS_URL } from '../support/env';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { buildService, freePort, sleep } from '../sdk/support';

/** Everything of one project a request of another project could read or change, as one comparable value. */
async function projectState(svc: RunningService, projectId: string): Promise<unknown> {
  const q = (sql: string) => svc.prisma.$queryRawUnsafe<any[]>(sql, projectId);
  return JSON.stringify({
    events: await q(`SELECT position::text, event_id, type, input_tokens::text, output_tokens::text, cost_micros::text, data FROM events WHERE project_id = $1 ORDER BY position`),
    reservations: await q(`SELECT id, status, closed_at FROM reservations WHERE project_id = $1 ORDER BY id`),
    policies: await q(`SELECT name, max_total_tokens::text, updated_at FROM policies WHERE project_id = $1 ORDER BY name`),
    prices: await q(`SELECT id, provider, model, input_per_million::text FROM price_overrides WHERE project_id = $1 ORDER BY id`),
    keys: await q(`SELECT id, revoked_at, scopes FROM api_keys WHERE project_id = $1 ORDER BY id`),
  });
}

describe('security', () => {
  let svc: RunningService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(() => svc.close());

  describe('project isolation: a key of project A with the ids of project B', () => {
    let a: TestProject;
    let b: TestProject;
    let bReservation: string;
    // B's figures are unusual numbers, so any of them in an answer to A is a leak. (Names A sent
    // itself, like B's policy name, may come back: A can have its own policy of that name.)
    const B_INPUT = 777_771;
    const B_MARKERS = ['777771', '777772', '777773'];
    const shared = { resourceId: 'shared-resource', userId: 'shared-user', traceId: 'shared-trace' };
    let bEvent: Record<string, any>;

    beforeAll(async () => {
      a = await createProject(svc.url);
      b = await createProject(svc.url);
      B_MARKERS.push(b.id);
      bEvent = stepEvent({ ...shared, usage: { inputTokens: B_INPUT, outputTokens: 777_772 } });
      expect((await call(svc.url, 'POST', '/v1/events', { token: b.key, body: { events: [bEvent] } })).body.accepted).toBe(1);
      const reserve = await call(svc.url, 'POST', '/v1/guard/check', {
        token: b.key,
        body: { context: shared, estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 10, maxOutputTokens: 10 }, reserve: true, stepId: 'b-step' },
      });
      bReservation = reserve.body.reservation.id;
      // A denial, so B has a GuardDecided audit entry.
      await call(svc.url, 'POST', '/v1/guard/check', { token: b.key, body: { context: shared, limits: [{ scope: 'resource', window: '24h', maxTotalTokens: 1 }] } });
      expect((await call(svc.url, 'PUT', '/v1/policies/b-only-policy', { token: b.key, body: { scope: 'resource', maxTotalTokens: 777_773 } })).status).toBe(200);
      expect((await call(svc.url, 'PUT', '/v1/prices/acme/b-only-model', { token: b.key, body: { inputPerMillion: 7, outputPerMillion: 7 } })).status).toBe(200);
    });

    type Row = { route: string; method: string; path: () => string; body?: () => unknown; token?: () => string; expect: (status: number, body: any) => void; waitsFor?: string };
    const rows: Row[] = [
      { route: 'POST /v1/events (B’s event id)', method: 'POST', path: () => '/v1/events', body: () => ({ events: [{ ...bEvent, usage: { inputTokens: 1, outputTokens: 1 } }] }), expect: (s, body) => expect([s, body.results[0].status]).toEqual([200, 'accepted']) },
      {
        route: 'POST /v1/guard/check (B’s scope ids)',
        method: 'POST',
        path: () => '/v1/guard/check',
        body: () => ({ context: shared, limits: [{ scope: 'resource', window: '24h', maxTotalTokens: 1_000_000_000 }, { scope: 'user', window: '24h', maxTotalTokens: 1_000_000_000 }] }),
        expect: (s, body) => {
          expect(s).toBe(200);
          // A sees its own one event above (2 tokens), never B's.
          expect(body.usage['resource:shared-resource@24h']).toMatchObject({ totalTokens: 2, reservedInputTokens: 0 });
          expect(body.usage['user:shared-user@24h']).toMatchObject({ totalTokens: 2 });
        },
      },
      { route: 'POST /v1/guard/reservations/:id/release (B’s reservation)', method: 'POST', path: () => `/v1/guard/reservations/${bReservation}/release`, body: () => ({}), expect: (s, body) => expect([s, body.field]).toEqual([404, 'id']) },
      { route: 'GET /v1/guard/decisions (B’s scope)', method: 'GET', path: () => '/v1/guard/decisions?scopeKey=resource:shared-resource', expect: (s, body) => expect([s, body.decisions]).toEqual([200, []]) },
      { route: 'GET /v1/policies', method: 'GET', path: () => '/v1/policies', expect: (s, body) => expect([s, body.policies]).toEqual([200, []]) },
      { route: 'DELETE /v1/policies/:name (B’s policy)', method: 'DELETE', path: () => '/v1/policies/b-only-policy', expect: (s) => expect(s).toBe(404) },
      { route: 'PUT /v1/policies/:name (B’s policy name)', method: 'PUT', path: () => '/v1/policies/b-only-policy', body: () => ({ scope: 'resource', maxTotalTokens: 5 }), expect: (s, body) => expect([s, body.maxTotalTokens]).toEqual([200, 5]) },
      { route: 'PUT /v1/prices/:provider/:model (B’s model)', method: 'PUT', path: () => '/v1/prices/acme/b-only-model', body: () => ({ inputPerMillion: 1, outputPerMillion: 1 }), expect: (s, body) => expect([s, body.inputPerMillion]).toEqual([200, 1]) },
      { route: 'GET /v1/prices', method: 'GET', path: () => '/v1/prices', expect: (s, body) => expect([s, body.prices.map((p: any) => p.inputPerMillion)]).toEqual([200, [1]]) },
      // Admin routes take the operator's token, never a project key, whatever its scopes.
      { route: 'GET /v1/admin/projects/:B/keys', method: 'GET', path: () => `/v1/admin/projects/${b.id}/keys`, expect: (s) => expect(s).toBe(401) },
      { route: 'POST /v1/admin/projects/:B/keys', method: 'POST', path: () => `/v1/admin/projects/${b.id}/keys`, body: () => ({ scopes: ['admin'] }), expect: (s) => expect(s).toBe(401) },
      { route: 'DELETE /v1/admin/projects/:B/keys/:key', method: 'DELETE', path: () => `/v1/admin/projects/${b.id}/keys/${b.keyId}`, expect: (s) => expect(s).toBe(401) },
      { route: 'DELETE /v1/admin/projects/:A/keys/:B’s key (admin token, wrong project)', method: 'DELETE', path: () => `/v1/admin/projects/${a.id}/keys/${b.keyId}`, token: () => TEST_ADMIN_TOKEN, expect: (s, body) => expect([s, body.field]).toEqual([404, 'keyId']) },
      // PLACEHOLDERS: these routes arrive with other merges; the row becomes a real check then.
      { route: 'POST /api/observability/metrics/aggregate', method: 'POST', path: () => '/api/observability/metrics/aggregate', waitsFor: 'metric projections (issue 4)', expect: () => undefined },
      { route: 'POST /api/observability/metrics/breakdown', method: 'POST', path: () => '/api/observability/metrics/breakdown', waitsFor: 'metric projections (issue 4)', expect: () => undefined },
      { route: 'GET /api/observability/discovery/entity-names', method: 'GET', path: () => '/api/observability/discovery/entity-names', waitsFor: 'metric projections (issue 4)', expect: () => undefined },
      { route: 'exporter routes (configure, status, replay of B’s exporter)', method: 'GET', path: () => '/v1/exporters', waitsFor: 'exporters (issue 5)', expect: () => undefined },
    ];

    let before: unknown;
    beforeAll(async () => {
      before = await projectState(svc, b.id);
    });

    for (const row of rows) {
      if (row.waitsFor) {
        it.todo(`PLACEHOLDER ${row.route}: never B's data, never a change to B — waits for the ${row.waitsFor} merge`);
        continue;
      }
      it(`${row.route}: never B's data, never a change to B`, async () => {
        const res = await call(svc.url, row.method, row.path(), { token: row.token ? row.token() : a.key, body: row.body?.() });
        row.expect(res.status, res.body);
        const text = JSON.stringify(res.body ?? '');
        for (const marker of B_MARKERS) expect(text).not.toContain(marker);
        expect(await projectState(svc, b.id)).toEqual(before);
      });
    }
  });

  describe('keys', () => {
    it('are stored as a SHA-256 hash of the secret; no column holds the key or its secret', async () => {
      const p = await createProject(svc.url);
      const { secret } = parseKey(p.key)!;
      const [row] = await svc.prisma.$queryRawUnsafe<any[]>('SELECT * FROM api_keys WHERE id = $1', p.keyId);
      expect(row.secret_hash).toBe(hashSecret(secret));
      const everything = JSON.stringify(row, (_, v) => (typeof v === 'bigint' ? String(v) : v));
      expect(everything).not.toContain(secret);
      const listed = await call(svc.url, 'GET', `/v1/admin/projects/${p.id}/keys`, { token: TEST_ADMIN_TOKEN });
      expect(JSON.stringify(listed.body)).not.toContain(secret);
    });

    it('stop working with the very next request once revoked', async () => {
      const p = await createProject(svc.url);
      expect((await call(svc.url, 'GET', '/v1/policies', { token: p.key })).status).toBe(200);
      expect((await call(svc.url, 'DELETE', `/v1/admin/projects/${p.id}/keys/${p.keyId}`, { token: TEST_ADMIN_TOKEN })).status).toBe(200);
      const after = await call(svc.url, 'GET', '/v1/policies', { token: p.key });
      expect(after.status).toBe(401);
      expect(after.body).toMatchObject({ code: 'unauthorized', field: 'authorization' });
    });
  });

  describe('rate limits per key, shared through Redis by every API replica', () => {
    it('lets exactly the burst through across two API instances, then 429 with Retry-After; other keys are not affected', async () => {
      // One request per 10 s with a burst of 10: within this test exactly 10 requests fit, however fast they come.
      const env = { RATE_LIMIT_PER_KEY_PER_SECOND: '0.1', RATE_LIMIT_BURST: '10', QUEUE_PREFIX: `tollgate-rate-${crypto.randomBytes(4).toString('hex')}` };
      const one = await startService(env);
      const two = await startService(env);
      try {
        const p = await createProject(one.url);
        const other = await createProject(one.url);
        const replies = [];
        for (let i = 0; i < 30; i++) replies.push(await call(i % 2 ? two.url : one.url, 'GET', '/v1/policies', { token: p.key }));
        const ok = replies.filter((r) => r.status === 200).length;
        const limited = replies.filter((r) => r.status === 429);
        expect([ok, limited.length]).toEqual([10, 20]);
        // Each instance refused requests: the count is shared, not per process.
        expect(new Set(replies.map((r, i) => (r.status === 429 ? i % 2 : -1)).filter((x) => x >= 0))).toEqual(new Set([0, 1]));
        for (const r of limited) {
          expect(r.body).toMatchObject({ statusCode: 429, code: 'rate_limited' });
          const retryAfter = Number(r.headers.get('retry-after'));
          expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 10).toBe(true);
        }
        expect((await call(two.url, 'GET', '/v1/policies', { token: other.key })).status).toBe(200);
      } finally {
        await one.close();
        await two.close();
      }
    });

    it('fails open when Redis cannot be reached: ingest keeps committing', async () => {
      const p = await createProject(svc.url, ['ingest']);
      const noRedis = await startService({ REDIS_URL: 'redis://127.0.0.1:1', RATE_LIMIT_PER_KEY_PER_SECOND: '0.1', RATE_LIMIT_BURST: '1' });
      try {
        for (let i = 0; i < 3; i++) {
          const res = await call(noRedis.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent()] } });
          expect([res.status, res.body.accepted]).toEqual([200, 1]);
        }
      } finally {
        await noRedis.close();
      }
    });
  });

  describe('request limits', () => {
    let p: TestProject;
    beforeAll(async () => {
      p = await createProject(svc.url, ['ingest']);
    });

    it('refuses a body over 1 MiB with 413, and a batch of 1001 events with 400 on events; stores none', async () => {
      const big = await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent({ labels: { big: 'x'.repeat(1000) }, traceId: 'big' }), ...Array.from({ length: 999 }, () => stepEvent({ traceId: 'big', labels: { pad: 'y'.repeat(1000) } }))] } });
      expect([big.status, big.body.field]).toEqual([413, '(body)']);
      const many = await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events: Array.from({ length: 1001 }, () => stepEvent({ traceId: 'many', usage: { inputTokens: 1, outputTokens: 1 } })) } });
      expect([many.status, many.body.field]).toEqual([400, 'events']);
      const exactly = await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events: Array.from({ length: 1000 }, () => stepEvent({ traceId: 'exact', usage: { inputTokens: 1, outputTokens: 1 } })) } });
      expect(exactly.body.accepted).toBe(1000);
      const [{ n }] = await svc.prisma.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND trace_id IN ('big', 'many')`, p.id);
      expect(n).toBe(0);
    });
  });

  describe('logs', () => {
    it('never contain a key, on success or on any kind of auth failure (API as a child process at the most verbose level)', async () => {
      buildService();
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      let output = '';
      const child = spawn(process.execPath, [join(__dirname, '../../dist/apps/api/src/main.js')], {
        env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: TEST_REDIS_URL, PORT: String(port), HOST: '127.0.0.1', TOLLGATE_ADMIN_TOKEN: TEST_ADMIN_TOKEN, LOG_LEVEL: 'verbose', QUEUE_PREFIX: `tollgate-logs-${crypto.randomBytes(4).toString('hex')}`, RATE_LIMIT_PER_KEY_PER_SECOND: '1', RATE_LIMIT_BURST: '3' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout!.on('data', (d) => (output += String(d)));
      child.stderr!.on('data', (d) => (output += String(d)));
      try {
        for (let i = 0; i < 300 && !(await fetch(`${url}/health/ready`).then((r) => r.ok, () => false)); i++) await sleep(100);
        const p = await createProject(url);
        const { id, secret } = parseKey(p.key)!;
        const revoked = await createProject(url);
        await call(url, 'DELETE', `/v1/admin/projects/${revoked.id}/keys/${revoked.keyId}`, { token: TEST_ADMIN_TOKEN });
        const attempts: [string, Record<string, string>, string?][] = [
          ['valid', { authorization: `Bearer ${p.key}` }],
          ['wrong secret', { authorization: `Bearer tg_${id}_${'A'.repeat(43)}` }],
          ['revoked', { authorization: `Bearer ${revoked.key}` }],
          ['not bearer', { authorization: `Basic ${p.key}` }],
          ['key with trailing junk', { authorization: `Bearer ${p.key}xx` }],
          ['key in a query string', {}, `?key=${p.key}`],
          ['key as the admin token', { authorization: `Bearer ${p.key}` }, 'admin'],
        ];
        for (const [, headers, extra] of attempts) {
          const path = extra === 'admin' ? '/v1/admin/projects' : `/v1/policies${extra ?? ''}`;
          await fetch(url + path, { method: extra === 'admin' ? 'POST' : 'GET', headers: { ...headers, 'content-type': 'application/json' }, body: extra === 'admin' ? '{"name":"x"}' : undefined });
        }
        // Past the rate limit (429), a bad body (400) and an ingest (200), with the key.
        for (let i = 0; i < 6; i++) await call(url, 'GET', '/v1/policies', { token: p.key });
        await call(url, 'POST', '/v1/events', { token: p.key, raw: '{"events":[{"a":1,"a":2}]}' });
        await sleep(300);
        expect(output).toContain('"status":401');
        expect(output).toContain('"status":429');
        for (const s of [p.key, secret, revoked.key, parseKey(revoked.key)!.secret]) expect(output).not.toContain(s);
      } finally {
        child.kill('SIGKILL');
      }
    }, 120_000);
  });
});
