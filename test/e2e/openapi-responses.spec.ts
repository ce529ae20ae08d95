import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { estimateResponseSchema, guardCheckResponseSchema, ingestResponseSchema } from '@tollgate/contracts';
import {
  decisionsResponse,
  exceededResponse,
  releaseResponse,
  usageResponse,
} from '../../libs/ledger/src/check-guard/http/guard.controller';
import {
  aggregateResponseSchema,
  breakdownResponseSchema,
  entityNamesResponseSchema,
  entityTypesResponseSchema,
  environmentsResponseSchema,
  labelKeysResponseSchema,
  labelValuesResponseSchema,
  metricNamesResponseSchema,
  MetricsProjector,
  percentilesResponseSchema,
  serviceNamesResponseSchema,
  tagsResponseSchema,
  timeSeriesResponseSchema,
} from '@tollgate/usage-metrics';
import { METRICS_RESPONSE } from '../../libs/telemetry/src/metrics.controller';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

/**
 * The OpenAPI document's response schemas against real answers: each route is called over HTTP and
 * its answer parsed with the very zod schema its @Documented names. The schemas are strict objects,
 * so a field the answer has and the schema lacks fails here: the document is complete, not a subset.
 */
let svc: RunningService;
let project: TestProject;
let doc: { paths: Record<string, Record<string, { responses: Record<string, { content?: unknown }> }>> };

beforeAll(async () => {
  svc = await startService();
  project = await createProject(svc.url, ['ingest', 'guard', 'read', 'admin']);
  doc = (await call(svc.url, 'GET', '/docs/json')).body;
});
afterAll(() => svc?.close());

const post = (path: string, body: unknown) => call(svc.url, 'POST', path, { token: project.key, body });
const get = (path: string) => call(svc.url, 'GET', path, { token: project.key });

/** The answer parses with the schema (unknown keys fail), to itself, and the document shows the schema. */
function expectDocumented(schema: z.ZodType, reply: { status: number; body: unknown }, method: string, path: string) {
  expect(reply.status).toBe(200);
  const parsed = schema.safeParse(reply.body);
  expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
  expect(parsed.data).toEqual(reply.body);
  if (reply.body && typeof reply.body === 'object' && !Array.isArray(reply.body))
    expect(schema.safeParse({ ...reply.body, notDocumented: 1 }).success).toBe(false);
  const response = Object.values(doc.paths[path][method].responses)[0] as {
    content: { 'application/json': { schema: unknown } };
  };
  expect(response.content['application/json'].schema).toBeDefined();
}

const ESTIMATE = { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 1000 };

test('POST /v1/guard/check: an allow with a reservation and forecasts, a shrink, a deny with warnings', async () => {
  const resourceId = `r-${randomUUID()}`;
  const traceId = `t-${randomUUID()}`;
  const reserved = await post('/v1/guard/check', {
    context: { resourceId, traceId },
    limits: [
      { scope: 'resource', window: '24h', maxCost: 1, warnAtPercent: 1 },
      { scope: 'run', maxTotalTokens: 1_000_000 },
      { scope: 'user', maxCost: 1 },
    ],
    estimate: ESTIMATE,
    reserve: true,
    stepId: `s-${randomUUID()}`,
  });
  expect(reserved.body).toMatchObject({ decision: 'allow', reservation: { id: expect.any(String) } });
  expect(reserved.body.skipped.length).toBe(1);
  expect(reserved.body.warnings.length).toBeGreaterThan(0);
  expectDocumented(guardCheckResponseSchema, reserved, 'post', '/v1/guard/check');

  const shrunk = await post('/v1/guard/check', {
    context: { resourceId: `r-${randomUUID()}` },
    limits: [{ scope: 'resource', window: '24h', maxCost: 0.01 }],
    estimate: ESTIMATE,
    reserve: true,
    stepId: `s-${randomUUID()}`,
    onExceed: 'shrink',
  });
  expect(shrunk.body.adjust).toMatchObject({ maxOutputTokens: 749 });
  expectDocumented(guardCheckResponseSchema, shrunk, 'post', '/v1/guard/check');

  const denied = await post('/v1/guard/check', {
    context: { resourceId: `r-${randomUUID()}` },
    limits: [{ scope: 'resource', window: '24h', maxCost: 0.001 }],
    estimate: ESTIMATE,
  });
  expect(denied.body.decision).toBe('deny');
  expectDocumented(guardCheckResponseSchema, denied, 'post', '/v1/guard/check');
});

test('POST /v1/events: accepted (one settling past its reservation), duplicate and rejected results', async () => {
  const resourceId = `r-${randomUUID()}`;
  const reserved = await post('/v1/guard/check', {
    context: { resourceId },
    estimate: { ...ESTIMATE, maxOutputTokens: 10 },
    reserve: true,
    stepId: `s-${randomUUID()}`,
  });
  const settling = stepEvent({
    resourceId,
    reservationId: reserved.body.reservation.id,
    usage: { inputTokens: 5000, outputTokens: 5000 },
  });
  const dup = stepEvent();
  await post('/v1/events', { events: [dup] });
  const reply = await post('/v1/events', { events: [settling, dup, { ...stepEvent(), usage: { inputTokens: -1 } }] });
  expect(reply.body.results[0].reason).toBeUndefined();
  expect(reply.body).toMatchObject({ accepted: 1, duplicates: 1, rejected: 1 });
  expect(reply.body.results[0].reservationExceeded).toBeDefined();
  expectDocumented(ingestResponseSchema, reply, 'post', '/v1/events');

  // The ReservationExceeded event is logged beside the settlement; wait for it to be readable.
  let exceeded = await get('/v1/guard/exceeded');
  for (let i = 0; i < 50 && !exceeded.body.exceeded.length; i++) {
    await new Promise((r) => setTimeout(r, 100));
    exceeded = await get('/v1/guard/exceeded');
  }
  expect(exceeded.body.exceeded.length).toBe(1);
  expectDocumented(exceededResponse, exceeded, 'get', '/v1/guard/exceeded');
});

test('POST /v1/guard/reservations/{id}/release: released, then released again', async () => {
  const reserved = await post('/v1/guard/check', {
    context: { resourceId: `r-${randomUUID()}` },
    estimate: ESTIMATE,
    reserve: true,
    stepId: `s-${randomUUID()}`,
  });
  const path = `/v1/guard/reservations/${reserved.body.reservation.id}/release`;
  const released = await call(svc.url, 'POST', path, { token: project.key });
  expect(released.body.status).toBe('released');
  expectDocumented(releaseResponse, released, 'post', '/v1/guard/reservations/{id}/release');
  expectDocumented(
    releaseResponse,
    await call(svc.url, 'POST', path, { token: project.key }),
    'post',
    '/v1/guard/reservations/{id}/release',
  );
});

test('GET /v1/guard/usage and /v1/guard/decisions: policies, usage and denials', async () => {
  const resourceId = `r-${randomUUID()}`;
  const put = (name: string, body: unknown) =>
    call(svc.url, 'PUT', `/v1/policies/${name}`, { token: project.key, body });
  expect((await put(`p-${randomUUID()}`, { scope: 'resource', window: '24h', maxCost: 0.001 })).status).toBe(200);
  expect(
    (await put(`p-${randomUUID()}`, { scope: 'resource', maxTotalTokens: 10, strategy: 'warn', entityName: 'bot' }))
      .status,
  ).toBe(200);
  await post('/v1/events', { events: [stepEvent({ resourceId })] });
  await post('/v1/guard/check', { context: { resourceId }, estimate: ESTIMATE });
  await post('/v1/guard/check', { context: { resourceId, entityName: 'bot' } });

  const usage = await get(`/v1/guard/usage?scopeKey=resource:${resourceId}`);
  expect(usage.body.policies.length).toBe(2);
  expect(usage.body.violations.length).toBeGreaterThan(0);
  expectDocumented(usageResponse, usage, 'get', '/v1/guard/usage');

  const decisions = await get(`/v1/guard/decisions?scopeKey=resource:${resourceId}`);
  expect(decisions.body.decisions.map((d: any) => d.decision)).toEqual(['deny', 'deny']);
  expect(decisions.body.decisions[0].context).toEqual({ resourceId, entityName: 'bot' });
  expectDocumented(decisionsResponse, decisions, 'get', '/v1/guard/decisions');
});

test('POST /v1/estimate: given tokens and counted messages', async () => {
  expectDocumented(estimateResponseSchema, await post('/v1/estimate', ESTIMATE), 'post', '/v1/estimate');
  const counted = await post('/v1/estimate', {
    provider: 'openai',
    model: 'gpt-4o',
    messages: [{ role: 'user', content: 'How much will this cost?' }],
    maxOutputTokens: 100,
  });
  expect(counted.body.counted).toBe('o200k');
  expectDocumented(estimateResponseSchema, counted, 'post', '/v1/estimate');
  const unpriced = await post('/v1/estimate', { ...ESTIMATE, provider: 'nobody', model: 'unknown' });
  expect(unpriced.body.priced).toBe(false);
  expectDocumented(estimateResponseSchema, unpriced, 'post', '/v1/estimate');
});

test('the /api/observability metrics and discovery routes, over projected steps (one unpriced)', async () => {
  const metrics = await createProject(svc.url, ['ingest', 'read']);
  const events = [
    stepEvent({ environment: 'production', serviceName: 'api', tags: ['a'], labels: { tier: 'pro' } }),
    stepEvent({ durationMs: 300, environment: 'staging', tags: ['b'] }),
    stepEvent({ provider: 'acme', model: 'acme-large-9' }),
  ];
  const ingested = await call(svc.url, 'POST', '/v1/events', { token: metrics.key, body: { events } });
  expect(ingested.body.accepted).toBe(3);
  const projector = svc.app.get(MetricsProjector);
  for (;;) if ((await projector.catchUp({ batchSize: 1000 })).caughtUp) break;

  const route = (path: string) => `/api/observability/${path}`;
  const ask = (method: string, path: string, body?: unknown) =>
    call(svc.url, method, route(path), { token: metrics.key, body });
  const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];
  const cases: [z.ZodType, string, string, unknown?][] = [
    [aggregateResponseSchema, 'post', 'metrics/aggregate', { name: TOTALS, aggregation: 'sum' }],
    [
      aggregateResponseSchema,
      'post',
      'metrics/aggregate',
      {
        name: TOTALS,
        aggregation: 'sum',
        comparePeriod: 'previous_day',
        filters: {
          timestamp: {
            start: new Date(Date.now() - 3_600_000).toISOString(),
            end: new Date(Date.now() + 60_000).toISOString(),
          },
        },
      },
    ],
    [
      breakdownResponseSchema,
      'post',
      'metrics/breakdown',
      { name: TOTALS, groupBy: ['model', 'tier'], aggregation: 'sum' },
    ],
    [timeSeriesResponseSchema, 'post', 'metrics/timeseries', { name: TOTALS, interval: '1h', aggregation: 'sum' }],
    [
      timeSeriesResponseSchema,
      'post',
      'metrics/timeseries',
      { name: TOTALS, interval: '1h', aggregation: 'sum', groupBy: ['model'] },
    ],
    [
      percentilesResponseSchema,
      'post',
      'metrics/percentiles',
      { name: 'mastra_model_duration_ms', percentiles: [0.5, 0.9], interval: '1d' },
    ],
    [metricNamesResponseSchema, 'get', 'discovery/metric-names'],
    [labelKeysResponseSchema, 'get', 'discovery/metric-label-keys?metricName=mastra_model_total_input_tokens'],
    [
      labelValuesResponseSchema,
      'get',
      'discovery/metric-label-values?metricName=mastra_model_total_input_tokens&labelKey=tier',
    ],
    [entityTypesResponseSchema, 'get', 'discovery/entity-types'],
    [entityNamesResponseSchema, 'get', 'discovery/entity-names?entityType=agent'],
    [serviceNamesResponseSchema, 'get', 'discovery/service-names'],
    [environmentsResponseSchema, 'get', 'discovery/environments'],
    [tagsResponseSchema, 'get', 'discovery/tags'],
  ];
  for (const [schema, method, path, body] of cases) {
    const reply = await ask(method.toUpperCase(), path, body);
    expectDocumented(schema, reply, method, route(path.split('?')[0]));
  }
  const unpriced = (await ask('POST', 'metrics/aggregate', { name: TOTALS, aggregation: 'sum' })).body;
  expect(unpriced.unpricedSteps).toBe(1);
  expect((await ask('GET', 'discovery/environments')).body.environments).toEqual(['production', 'staging']);
  expect(
    (await ask('GET', 'discovery/metric-label-values?metricName=mastra_model_total_input_tokens&labelKey=tier')).body
      .values,
  ).toEqual(['pro']);
});

test('GET /metrics: Prometheus text, documented with its media type', async () => {
  const res = await fetch(`${svc.url}/metrics`);
  expect(res.status).toBe(200);
  const mediaType = res.headers.get('content-type')!;
  expect(mediaType).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  expect(METRICS_RESPONSE.parse(text)).toMatch(/^# HELP /m);
  const content = doc.paths['/metrics'].get.responses['200'].content as Record<string, { schema: unknown }>;
  expect(Object.keys(content)).toEqual([mediaType]);
  expect(content[mediaType].schema).toMatchObject({ type: 'string' });
});
