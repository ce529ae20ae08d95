import { randomUUID } from 'node:crypto';
import { TEST_ADMIN_TOKEN } from '../support/env';
import { call, createProject, stepEvent } from '../support/http';
import { startService, type RunningService } from '../support/service';

/**
 * Each API process caches keys and project settings; a change made through one replica must
 * reach the others (LISTEN/NOTIFY) before a client can act on it.
 */
describe('caches across API replicas', () => {
  let a: RunningService;
  let b: RunningService;
  beforeAll(async () => {
    [a, b] = await Promise.all([startService(), startService()]);
    await new Promise((r) => setTimeout(r, 300)); // both listeners connected
  });
  afterAll(() => Promise.all([a.close(), b.close()]));

  const settle = () => new Promise((r) => setTimeout(r, 50));

  it('a key revoked through one replica stops working on the other', async () => {
    const p = await createProject(a.url, ['ingest']);
    expect((await call(b.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent()] } })).status).toBe(
      200,
    ); // cached on b
    expect(
      (await call(a.url, 'DELETE', `/v1/admin/projects/${p.id}/keys/${p.keyId}`, { token: TEST_ADMIN_TOKEN })).status,
    ).toBe(200);
    await settle();
    expect((await call(b.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent()] } })).status).toBe(
      401,
    );
    expect((await call(a.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent()] } })).status).toBe(
      401,
    );
  });

  it('a policy set through one replica applies to checks on the other', async () => {
    const p = await createProject(a.url);
    const resourceId = `r-${randomUUID()}`;
    await call(b.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent({ resourceId })] } });
    const check = () => call(b.url, 'POST', '/v1/guard/check', { token: p.key, body: { context: { resourceId } } });
    expect((await check()).body.decision).toBe('allow'); // b caches "no policies"
    await call(a.url, 'PUT', '/v1/policies/cap', {
      token: p.key,
      body: { scope: 'resource', window: '24h', maxTotalTokens: 100 },
    });
    await settle();
    expect((await check()).body.decision).toBe('deny');
    await call(a.url, 'DELETE', '/v1/policies/cap', { token: p.key });
    await settle();
    expect((await check()).body.decision).toBe('allow');
  });

  it('a price set through one replica prices the next event ingested on the other', async () => {
    const p = await createProject(a.url);
    await call(b.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent()] } }); // b caches "no overrides"
    await call(a.url, 'PUT', '/v1/prices/openai/gpt-4o', {
      token: p.key,
      body: { effectiveFrom: '2020-01-01T00:00:00Z', inputPerMillion: 1, outputPerMillion: 1 },
    });
    await settle();
    const e = stepEvent();
    await call(b.url, 'POST', '/v1/events', { token: p.key, body: { events: [e] } });
    const [row] = await b.prisma.sql.query<{ cost_micros: string; cost_source: string }>(
      'SELECT cost_micros, cost_source FROM events WHERE project_id = $1 AND event_id = $2',
      p.id,
      e.eventId,
    );
    expect(row).toEqual({ cost_micros: '1200', cost_source: 'override' });
  });
});
