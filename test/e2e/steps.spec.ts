import { randomUUID } from 'node:crypto';
import { startService, type RunningService } from '../support/service';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { TEST_ADMIN_TOKEN } from '../support/env';
import { latencyResponse, runResponse, stepsResponse } from '../../libs/ledger/src/read-steps/steps.schemas';

/** GET /v1/steps, /v1/steps/latency and /v1/runs/:traceId over HTTP: scopes, paging, and a 400 naming each bad field. */
let service: RunningService;
let project: TestProject;
let readKey: string;
const traceId = `run-${randomUUID()}`;

beforeAll(async () => {
  service = await startService();
  project = await createProject(service.url, ['ingest', 'guard', 'admin']);
  readKey = (
    await call(service.url, 'POST', `/v1/admin/projects/${project.id}/keys`, {
      token: TEST_ADMIN_TOKEN,
      body: { scopes: ['read'] },
    })
  ).body.key;
  const now = Date.now();
  const events = Array.from({ length: 5 }, (_, i) =>
    stepEvent({
      eventId: `s${i}`,
      traceId,
      occurredAt: new Date(now - (5 - i) * 60_000).toISOString(),
      durationMs: 100 * (i + 1),
    }),
  );
  expect((await call(service.url, 'POST', '/v1/events', { token: project.key, body: { events } })).body.accepted).toBe(
    5,
  );
});
afterAll(() => service?.close());

const get = (path: string, token = readKey) => call(service.url, 'GET', path, { token });

test('a read key pages the steps newest first; another scope is refused; another project sees none', async () => {
  const first = await get('/v1/steps?limit=3');
  expect(first.status).toBe(200);
  expect(first.body.steps.map((s: any) => s.eventId)).toEqual(['s4', 's3', 's2']);
  expect(typeof first.body.nextCursor).toBe('string');
  const second = await get(`/v1/steps?limit=3&cursor=${first.body.nextCursor}`);
  expect(second.body).toMatchObject({ nextCursor: null });
  expect(second.body.steps.map((s: any) => s.eventId)).toEqual(['s1', 's0']);
  expect(second.body.steps[0]).toMatchObject({
    scopes: { traceId, resourceId: 'resource-1' },
    model: 'gpt-4o',
    usage: { inputTokens: 1000, outputTokens: 200 },
    durationMs: 200,
    unpriced: false,
    costUnit: 'USD',
  });

  expect((await get('/v1/steps', project.key)).status).toBe(403);
  expect((await call(service.url, 'GET', '/v1/steps')).status).toBe(401);
  const other = await createProject(service.url, ['read']);
  expect((await get('/v1/steps', other.key)).body).toEqual({ steps: [], nextCursor: null });
  expect((await get(`/v1/runs/${traceId}`, other.key)).body).toEqual({
    traceId,
    steps: [],
    guard: [],
    truncated: false,
  });
});

test('a run lists its steps oldest first; latency gives p50/p95 per model', async () => {
  const run = await get(`/v1/runs/${encodeURIComponent(traceId)}`);
  expect(run.status).toBe(200);
  expect(run.body.steps.map((s: any) => s.eventId)).toEqual(['s0', 's1', 's2', 's3', 's4']);
  const latency = await get(`/v1/steps/latency?traceId=${traceId}`);
  expect(latency.body).toEqual({
    models: [{ provider: 'openai', model: 'gpt-4o', steps: 5, p50: 300, p95: 500, max: 500 }],
  });
});

test.each([
  ['limit=0', 'limit', 'limit must be at least 1'],
  ['limit=201', 'limit', 'limit must be at most 200'],
  ['limit=x', 'limit', 'limit must be a number'],
  ['cursor=nope', 'cursor', 'cursor must be a cursor this route returned (nextCursor)'],
  [
    `cursor=${Buffer.from('1.2.3').toString('base64url')}`,
    'cursor',
    'cursor must be a cursor this route returned (nextCursor)',
  ],
  ['from=yesterday', 'from', 'from must be an ISO-8601 timestamp with a time zone'],
  ['from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', 'to', 'to must not be before from'],
  ['unpriced=yes', 'unpriced', 'unpriced must be true or false'],
  ['model=', 'model', 'model must not be empty'],
  ['tag=a%01b', 'tag', 'tag must not contain control characters'],
  ['agent=x', 'agent', undefined],
])('GET /v1/steps?%s is a 400 naming %s', async (qs, field, message) => {
  const r = await get(`/v1/steps?${qs}`);
  expect(r.status).toBe(400);
  expect(r.body).toMatchObject({ code: 'validation_failed', field });
  if (message) expect(r.body.message).toBe(message);
});

test('the latency and run routes name their bad fields too', async () => {
  expect((await get('/v1/steps/latency?unpriced=true')).body).toMatchObject({
    code: 'validation_failed',
    field: 'unpriced',
  });
  expect((await get('/v1/steps/latency?limit=101')).body).toMatchObject({
    field: 'limit',
    message: 'limit must be at most 100',
  });
  expect((await get(`/v1/runs/${traceId}?limit=1001`)).body).toMatchObject({
    field: 'limit',
    message: 'limit must be at most 1000',
  });
  expect((await get(`/v1/runs/${'x'.repeat(257)}`)).body).toMatchObject({ field: 'traceId' });
});

test('the OpenAPI document describes every field the routes answer (the schemas strip nothing from real answers)', async () => {
  const reserved = await call(service.url, 'POST', '/v1/guard/check', {
    token: project.key,
    body: {
      context: { traceId },
      estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 10, maxOutputTokens: 10 },
      reserve: true,
      stepId: `step-${randomUUID()}`,
      limits: [{ scope: 'run', maxCost: 100 }],
    },
  });
  await call(service.url, 'POST', '/v1/events', {
    token: project.key,
    body: {
      events: [
        stepEvent({
          traceId,
          reservationId: reserved.body.reservation.id,
          usage: { inputTokens: 10, outputTokens: 10, cacheReadTokens: 2, reasoningTokens: 1 },
        }),
      ],
    },
  });
  const steps = (await get('/v1/steps?limit=10')).body;
  expect(steps.steps.some((s: any) => s.reservation)).toBe(true);
  expect(stepsResponse.parse(steps)).toEqual(steps);
  const run = (await get(`/v1/runs/${traceId}`)).body;
  expect(run.guard.length).toBeGreaterThan(0);
  expect(runResponse.parse(run)).toEqual(run);
  const latency = (await get('/v1/steps/latency')).body;
  expect(latencyResponse.parse(latency)).toEqual(latency);
  const doc = (await call(service.url, 'GET', '/docs/json')).body;
  for (const path of ['/v1/steps', '/v1/steps/latency', '/v1/runs/{traceId}'])
    expect(doc.paths[path].get.responses['200'].content['application/json'].schema).toBeDefined();
});
