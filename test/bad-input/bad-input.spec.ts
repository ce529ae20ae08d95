import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { TEST_ADMIN_TOKEN } from '../support/env';
import { call, createProject, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { generate, type BadRequest, type EndpointSpec, type ParamSpec } from './generate';

/** What the service answered to one malformed request, as the suite judges it. */
type Outcome = '4xx' | '200 all rejected' | 'answered' | '5xx' | 'accepted';
const OUTCOMES: Outcome[] = ['4xx', '200 all rejected', 'answered', '5xx', 'accepted'];

const TABLES = [
  'events',
  'event_ids',
  'reservations',
  'policies',
  'price_overrides',
  'projects',
  'api_keys',
  'exporters',
  'export_batches',
];

async function snapshot(svc: RunningService): Promise<Record<string, number>> {
  const parts = TABLES.map((t) => `(SELECT count(*) FROM ${t})::int AS "${t}"`);
  parts.push(`(SELECT count(*) FROM reservations WHERE status = 'open')::int AS "open reservations"`);
  parts.push(`(SELECT count(*) FROM api_keys WHERE revoked_at IS NOT NULL)::int AS "revoked keys"`);
  parts.push(`(SELECT coalesce(max(position), 0) FROM events)::text AS "last event position"`);
  // A refused settings change changes nothing either.
  parts.push(
    `(SELECT md5(string_agg(concat_ws('|', id, unpriced_policy, unpriced_fallback::text, cost_unit, exchange_rates::text), ',' ORDER BY id)) FROM projects) AS "project settings"`,
  );
  parts.push(
    `(SELECT md5(string_agg(concat_ws('|', id, name, status, settings::text, checkpoint_position::text, updated_at::text), ',' ORDER BY id)) FROM exporters) AS "exporters"`,
  );
  const [row] = await svc.prisma.$queryRawUnsafe<Record<string, number>[]>(`SELECT ${parts.join(', ')}`);
  return row;
}

const id = (value: string): ParamSpec => ({ in: 'path', value, kind: 'id' });
const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];
const RANGE = {
  start: '2026-01-01T00:00:00Z',
  end: '2026-02-01T00:00:00.000Z',
  startExclusive: false,
  endExclusive: true,
};
const SCOPE_KEY: ParamSpec = {
  in: 'query',
  value: 'resource:resource-1',
  kind: 'format',
  inner: (v) => `resource:${v}`,
};
const LIMIT = (max?: number): ParamSpec => ({ in: 'query', value: '10', kind: 'int', max });
const METRIC_NAME: ParamSpec = {
  in: 'query',
  value: 'mastra_model_total_input_tokens',
  kind: 'format',
  required: true,
};
const QUERY_TEXT = (value: string, extra: Partial<ParamSpec> = {}): ParamSpec => ({
  in: 'query',
  value,
  kind: 'text',
  maxLength: 1024,
  ...extra,
});
const EXPORTER: ParamSpec = { in: 'path', value: 'bad-input-exporter', kind: 'format', maxLength: 63 };
const EXPORTER_SETTINGS = {
  batch: { maxEvents: 100, maxBytes: 65536, maxWaitMs: 500 },
  retry: { maxAttempts: 3, initialBackoffMs: 100, maxBackoffMs: 1000 },
  timeoutMs: 1000,
  pauseAfterFailures: 3,
  startFrom: 'now',
};
const textPaths = (prefix: (string | number)[], keys: string[]) => keys.map((k) => [...prefix, k]);

/** One valid request per route of every controller (libs/**\/*.controller.ts, apps/api/src/*.controller.ts) that takes a parameter. */
function specs(project: TestProject, fixtures: { reservationId: string; keyId: string }): EndpointSpec[] {
  const now = new Date().toISOString();
  const metric = (route: string, body: Record<string, unknown>, extra: Partial<EndpointSpec>): EndpointSpec => ({
    name: `POST /api/observability/metrics/${route}`,
    method: 'POST',
    url: () => `/api/observability/metrics/${route}`,
    params: {},
    body,
    readOnly: true,
    ...extra,
  });
  const discovery = (route: string, params: Record<string, ParamSpec>): EndpointSpec => ({
    name: `GET /api/observability/discovery/${route}`,
    method: 'GET',
    url: () => `/api/observability/discovery/${route}`,
    params,
    readOnly: true,
    strictQuery: true,
  });
  const exporter = (method: string, sub: string, extra: Partial<EndpointSpec> = {}): EndpointSpec => ({
    name: `${method} /v1/exporters/:name${sub}`,
    method,
    url: (p) => `/v1/exporters/${p.name}${sub}`,
    params: { name: EXPORTER },
    ...extra,
  });
  const file = (prefix: string, value: string): EndpointSpec => ({
    name: `GET ${prefix}/:file`,
    method: 'GET',
    url: (p) => `${prefix}/${p.file}`,
    params: { file: { in: 'path', value, kind: 'format' } },
    readOnly: true,
    static: true,
  });
  return [
    {
      name: 'POST /v1/events',
      method: 'POST',
      url: () => '/v1/events',
      params: {},
      body: {
        events: [
          {
            eventId: `bad-input-${randomUUID()}`,
            occurredAt: now,
            traceId: 'trace-1',
            spanId: 'span-1',
            runId: 'run-1',
            threadId: 'thread-1',
            resourceId: 'resource-1',
            userId: 'user-1',
            organizationId: 'org-1',
            sessionId: 'session-1',
            entityType: 'agent',
            entityName: 'support-agent',
            provider: 'openai',
            model: 'gpt-4o',
            usage: {
              inputTokens: 1000,
              outputTokens: 200,
              cacheReadTokens: 100,
              cacheWriteTokens: 100,
              reasoningTokens: 50,
              audioInputTokens: 10,
              imageInputTokens: 10,
            },
            cost: { amount: 0.01, currency: 'USD', source: 'provider' },
            durationMs: 1200,
            finishReason: 'stop',
            stepIndex: 3,
            reservationId: 'res-unknown',
            labels: { team: 'core' },
            tags: ['prod'],
            environment: 'production',
            serviceName: 'agents',
          },
        ],
      },
      required: [
        ['events'],
        ['events', 0, 'eventId'],
        ['events', 0, 'occurredAt'],
        ['events', 0, 'traceId'],
        ['events', 0, 'entityType'],
        ['events', 0, 'provider'],
        ['events', 0, 'model'],
        ['events', 0, 'usage'],
        ['events', 0, 'usage', 'inputTokens'],
        ['events', 0, 'usage', 'outputTokens'],
      ],
      reals: [
        ['events', 0, 'cost', 'amount'],
        ['events', 0, 'durationMs'],
      ],
      timestamps: [['events', 0, 'occurredAt']],
      records: [['events', 0, 'labels']],
      freeText: textPaths(
        ['events', 0],
        [
          'eventId',
          'traceId',
          'spanId',
          'runId',
          'threadId',
          'resourceId',
          'userId',
          'organizationId',
          'sessionId',
          'entityType',
          'entityName',
          'provider',
          'model',
          'finishReason',
          'reservationId',
          'environment',
          'serviceName',
        ],
      ).concat([
        ['events', 0, 'cost', 'source'],
        ['events', 0, 'labels', 'team'],
        ['events', 0, 'tags', 0],
      ]),
    },
    {
      name: 'POST /v1/guard/check',
      method: 'POST',
      url: () => '/v1/guard/check',
      params: {},
      body: {
        context: {
          traceId: 'trace-1',
          runId: 'run-1',
          threadId: 'thread-1',
          resourceId: 'resource-1',
          userId: 'user-1',
          organizationId: 'org-1',
          sessionId: 'session-1',
          entityType: 'agent',
          entityName: 'support-agent',
        },
        limits: [
          {
            scope: 'resource',
            window: '24h',
            maxCost: 5,
            costUnit: 'USD',
            maxTotalTokens: 100000,
            maxInputTokens: 90000,
            maxOutputTokens: 10000,
            warnAtPercent: 80,
          },
        ],
        estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 500 },
        reserve: true,
        stepId: 'step-1',
        failMode: 'open',
        dryRun: false,
      },
      required: [
        ['context'],
        ['limits', 0, 'scope'],
        ['estimate'],
        ['stepId'],
        ['estimate', 'provider'],
        ['estimate', 'model'],
        ['estimate', 'inputTokens'],
        ['estimate', 'maxOutputTokens'],
      ],
      reals: [
        ['limits', 0, 'maxCost'],
        ['limits', 0, 'warnAtPercent'],
      ],
      freeText: [
        ...textPaths(
          ['context'],
          [
            'traceId',
            'runId',
            'threadId',
            'resourceId',
            'userId',
            'organizationId',
            'sessionId',
            'entityType',
            'entityName',
          ],
        ),
        ['estimate', 'provider'],
        ['estimate', 'model'],
        ['stepId'],
      ],
    },
    {
      name: 'POST /v1/guard/reservations/:id/release',
      method: 'POST',
      url: (p) => `/v1/guard/reservations/${p.id}/release`,
      params: { id: id(fixtures.reservationId) },
      body: {},
    },
    {
      name: 'GET /v1/guard/usage',
      method: 'GET',
      url: () => '/v1/guard/usage',
      params: { scopeKey: { ...SCOPE_KEY, required: true } },
      readOnly: true,
      strictQuery: true,
    },
    {
      name: 'GET /v1/guard/exceeded',
      method: 'GET',
      url: () => '/v1/guard/exceeded',
      params: { scopeKey: SCOPE_KEY, limit: LIMIT(500) },
      readOnly: true,
      strictQuery: true,
    },
    {
      name: 'GET /v1/alerts',
      method: 'GET',
      url: () => '/v1/alerts',
      params: { scopeKey: SCOPE_KEY, limit: LIMIT(500) },
      readOnly: true,
      strictQuery: true,
    },
    {
      name: 'GET /v1/guard/decisions',
      method: 'GET',
      url: () => '/v1/guard/decisions',
      params: { scopeKey: { ...SCOPE_KEY, value: 'thread:thread-1', inner: (v) => `thread:${v}` }, limit: LIMIT(500) },
      readOnly: true,
      strictQuery: true,
    },
    {
      name: 'PUT /v1/policies/:name',
      method: 'PUT',
      url: (p) => `/v1/policies/${p.name}`,
      params: { name: id('bad-input-policy') },
      body: {
        scope: 'resource',
        window: '24h',
        maxCost: 5,
        maxTotalTokens: 100000,
        maxInputTokens: 90000,
        maxOutputTokens: 10000,
        warnAtPercent: 80,
        strategy: 'block',
        entityName: 'support-agent',
      },
      required: [['scope']],
      reals: [['maxCost'], ['warnAtPercent']],
      freeText: [['entityName']],
    },
    {
      name: 'DELETE /v1/policies/:name',
      method: 'DELETE',
      url: (p) => `/v1/policies/${p.name}`,
      params: { name: id('bad-input-policy') },
    },
    {
      name: 'PUT /v1/prices/:provider/:model',
      method: 'PUT',
      url: (p) => `/v1/prices/${p.provider}/${p.model}`,
      params: { provider: id('acme'), model: id('acme-large') },
      body: {
        effectiveFrom: '2026-01-01T00:00:00Z',
        currency: 'USD',
        inputPerMillion: 2.5,
        outputPerMillion: 10,
        cacheReadPerMillion: 1.25,
        cacheWritePerMillion: 3,
      },
      required: [['inputPerMillion'], ['outputPerMillion']],
      reals: [['inputPerMillion'], ['outputPerMillion'], ['cacheReadPerMillion'], ['cacheWritePerMillion']],
      timestamps: [['effectiveFrom']],
    },
    {
      name: 'POST /v1/admin/projects',
      method: 'POST',
      url: () => '/v1/admin/projects',
      params: {},
      body: { name: 'bad input project', unpricedPolicy: 'deny', id: `bad-input-${randomUUID().slice(0, 8)}` },
      required: [['name']],
      freeText: [['name']],
    },
    {
      name: 'PATCH /v1/admin/projects/:id',
      method: 'PATCH',
      url: (p) => `/v1/admin/projects/${p.projectId}`,
      params: { projectId: id(project.id) },
      body: {
        unpricedPolicy: 'fallback',
        unpricedFallback: { inputPerMillion: 3, outputPerMillion: 15, currency: 'USD' },
        costUnit: 'USD',
        exchangeRates: { EUR: 1.1, JPY: 0.0067 },
      },
      reals: [
        ['unpricedFallback', 'inputPerMillion'],
        ['unpricedFallback', 'outputPerMillion'],
        ['exchangeRates', 'EUR'],
        ['exchangeRates', 'JPY'],
      ],
    },
    {
      name: 'POST /v1/admin/projects/:id/keys',
      method: 'POST',
      url: (p) => `/v1/admin/projects/${p.projectId}/keys`,
      params: { projectId: id(project.id) },
      body: { scopes: ['ingest', 'read'], name: 'bad input key' },
      required: [['scopes']],
      freeText: [['name']],
    },
    {
      name: 'GET /v1/admin/projects/:id/keys',
      method: 'GET',
      url: (p) => `/v1/admin/projects/${p.projectId}/keys`,
      params: { projectId: id(project.id) },
      readOnly: true,
    },
    {
      name: 'DELETE /v1/admin/projects/:id/keys/:keyId',
      method: 'DELETE',
      url: (p) => `/v1/admin/projects/${p.projectId}/keys/${p.keyId}`,
      params: { projectId: id(project.id), keyId: id(fixtures.keyId) },
    },
    metric(
      'aggregate',
      {
        name: TOTALS,
        aggregation: 'count_distinct',
        distinctColumn: 'model',
        filters: {
          timestamp: RANGE,
          traceId: 'trace-1',
          traceIds: ['trace-1'],
          spanId: 'span-1',
          runId: 'run-1',
          threadId: 'thread-1',
          resourceId: 'resource-1',
          userId: 'user-1',
          organizationId: 'org-1',
          sessionId: 'session-1',
          requestId: 'request-1',
          entityType: 'agent',
          entityName: 'support-agent',
          provider: 'openai',
          model: 'gpt-4o',
          costUnit: 'USD',
          environment: 'production',
          serviceName: 'agents',
          tags: ['prod'],
          labels: { team: 'core' },
          name: ['mastra_model_total_input_tokens'],
        },
        comparePeriod: 'previous_period',
      },
      {
        required: [['name'], ['aggregation'], ['distinctColumn']],
        timestamps: [
          ['filters', 'timestamp', 'start'],
          ['filters', 'timestamp', 'end'],
        ],
        records: [['filters', 'labels']],
        freeText: [
          ...textPaths(
            ['filters'],
            [
              'traceId',
              'spanId',
              'runId',
              'threadId',
              'resourceId',
              'userId',
              'organizationId',
              'sessionId',
              'requestId',
              'entityType',
              'entityName',
              'provider',
              'model',
              'costUnit',
              'environment',
              'serviceName',
            ],
          ),
          ['filters', 'traceIds', 0],
          ['filters', 'tags', 0],
          ['filters', 'labels', 'team'],
        ],
      },
    ),
    metric(
      'breakdown',
      {
        name: TOTALS,
        groupBy: ['provider', 'team'],
        aggregation: 'sum',
        filters: { timestamp: RANGE, model: 'gpt-4o', labels: { team: 'core' } },
        limit: 10,
        orderDirection: 'ASC',
      },
      {
        required: [['name'], ['groupBy'], ['aggregation']],
        timestamps: [
          ['filters', 'timestamp', 'start'],
          ['filters', 'timestamp', 'end'],
        ],
        records: [['filters', 'labels']],
        freeText: [
          ['groupBy', 0],
          ['groupBy', 1],
          ['filters', 'model'],
          ['filters', 'labels', 'team'],
        ],
      },
    ),
    metric(
      'timeseries',
      {
        name: TOTALS,
        interval: '1h',
        aggregation: 'last',
        groupBy: ['model'],
        filters: { timestamp: RANGE, resourceId: 'resource-1', tags: ['prod'] },
      },
      {
        required: [['name'], ['interval'], ['aggregation']],
        timestamps: [
          ['filters', 'timestamp', 'start'],
          ['filters', 'timestamp', 'end'],
        ],
        freeText: [
          ['groupBy', 0],
          ['filters', 'resourceId'],
          ['filters', 'tags', 0],
        ],
      },
    ),
    metric(
      'percentiles',
      {
        name: 'mastra_model_duration_ms',
        percentiles: [0.5, 0.99],
        interval: '1d',
        filters: { timestamp: RANGE, traceIds: ['trace-1', 'trace-2'], entityName: 'support-agent' },
      },
      {
        required: [['name'], ['percentiles'], ['interval']],
        reals: [
          ['percentiles', 0],
          ['percentiles', 1],
        ],
        timestamps: [
          ['filters', 'timestamp', 'start'],
          ['filters', 'timestamp', 'end'],
        ],
        freeText: [
          ['filters', 'traceIds', 0],
          ['filters', 'traceIds', 1],
          ['filters', 'entityName'],
        ],
      },
    ),
    discovery('metric-names', { prefix: QUERY_TEXT('mastra_model', { emptyOk: true }), limit: LIMIT() }),
    discovery('metric-label-keys', { metricName: METRIC_NAME }),
    discovery('metric-label-values', {
      metricName: METRIC_NAME,
      labelKey: QUERY_TEXT('team', { required: true }),
      prefix: QUERY_TEXT('co', { emptyOk: true }),
      limit: LIMIT(),
    }),
    discovery('entity-types', {}),
    discovery('entity-names', { entityType: QUERY_TEXT('agent') }),
    discovery('service-names', {}),
    discovery('environments', {}),
    discovery('tags', { entityType: QUERY_TEXT('agent') }),
    exporter('PUT', '', {
      name: 'PUT /v1/exporters/:name (webhook)',
      params: { name: { ...EXPORTER, value: 'bad-input-new-webhook' } },
      body: {
        type: 'webhook',
        url: 'http://127.0.0.1:9/hook',
        signingSecret: 'bad-input-signing-secret-0123',
        headers: { 'x-team': 'core' },
        eventTypes: ['StepUsageRecorded'],
        ...EXPORTER_SETTINGS,
      },
      required: [['type'], ['url'], ['signingSecret']],
      records: [['headers']],
      freeText: [['headers', 'x-team']],
      minLengthText: [['signingSecret']],
      headerValues: [['headers', 'x-team']],
    }),
    exporter('PUT', '', {
      name: 'PUT /v1/exporters/:name (otlp)',
      params: { name: { ...EXPORTER, value: 'bad-input-new-otlp' } },
      body: {
        type: 'otlp',
        endpoint: 'http://127.0.0.1:9',
        headers: { 'x-team': 'core' },
        serviceName: 'agents',
        ...EXPORTER_SETTINGS,
      },
      required: [['type'], ['endpoint']],
      records: [['headers']],
      freeText: [['serviceName'], ['headers', 'x-team']],
      headerValues: [['headers', 'x-team']],
    }),
    exporter('GET', '', { readOnly: true }),
    exporter('DELETE', ''),
    exporter('POST', '/replay', {
      name: 'POST /v1/exporters/:name/replay (fromTime)',
      body: { fromTime: '2026-01-01T00:00:00Z' },
      timestamps: [['fromTime']],
      timestampRange: 'any',
    }),
    exporter('POST', '/replay', {
      name: 'POST /v1/exporters/:name/replay (fromPosition)',
      body: { fromPosition: 0 },
      required: [['fromPosition']],
    }),
    exporter('POST', '/pause'),
    exporter('POST', '/resume'),
    exporter('GET', '/dead-letters', { readOnly: true }),
    exporter('POST', '/dead-letters/retry'),
    {
      name: 'POST /v1/exporters/:name/dead-letters/:batchId/retry',
      method: 'POST',
      url: (p) => `/v1/exporters/${p.name}/dead-letters/${p.batchId}/retry`,
      params: { name: EXPORTER, batchId: { in: 'path', value: 'xb_00000000000000000000', kind: 'format' } },
    },
    file('/dashboard/assets', 'app.js'),
    file('/dashboard/vendor', 'uPlot.min.css'),
    file('/docs/assets', 'swagger-ui.css'),
  ];
}

/**
 * A path fetch() would rewrite (its dot segments resolved, as a browser does: `/dashboard/assets/..`
 * is `/dashboard/`) goes out as it is, so the route gets the `..` an attacker's client sends.
 */
function sendVerbatim(
  base: string,
  c: BadRequest,
  headers: Record<string, string>,
): Promise<{ status: number; text: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method: c.method, path: c.path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(c.body === undefined ? undefined : Buffer.from(c.body));
  });
}

async function send(base: string, c: BadRequest, token: string): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (c.contentType !== undefined) headers['content-type'] = c.contentType;
  let status: number;
  let text: string;
  if (new URL(base + c.path).pathname !== c.path.split('?')[0]) {
    ({ status, text } = await sendVerbatim(base, c, headers));
  } else {
    // A Buffer body: fetch adds no content type of its own, and sends the bytes as they are.
    const res = await fetch(base + c.path, {
      method: c.method,
      headers,
      body: c.body === undefined ? undefined : Buffer.from(c.body),
    });
    status = res.status;
    text = await res.text();
  }
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* keep the text */
  }
  return { status, body };
}

/** How the suite judges one answer: its outcome, and what is wrong with it (if anything). */
function judge(c: BadRequest, res: { status: number; body: any }): { outcome: Outcome; problem?: string } {
  const at = `${c.endpoint} ${c.category} ${c.what}`;
  const expected = c.field === undefined ? undefined : ([] as string[]).concat(c.field);
  if (res.status >= 500)
    return { outcome: '5xx', problem: `${at}: 5xx ${res.status} ${JSON.stringify(res.body).slice(0, 200)}` };
  if (res.status >= 400) {
    const field = res.body?.field;
    // A static file that is not there is a 404 and no more.
    if (c.endpoint.startsWith('GET /dashboard') || c.endpoint.startsWith('GET /docs'))
      return { outcome: '4xx', problem: res.status === 404 ? undefined : `${at}: ${res.status}, not 404` };
    if (typeof field !== 'string' || !field || typeof res.body?.message !== 'string')
      return {
        outcome: '4xx',
        problem: `${at}: ${res.status} without a field: ${JSON.stringify(res.body).slice(0, 200)}`,
      };
    // A name that may be valid may also not be found: the 404 names what was looked up.
    if (expected && !expected.includes(field) && !(c.mayAccept && res.status === 404))
      return {
        outcome: '4xx',
        problem: `${at}: named ${field}, expected ${expected.join(' or ')} (${JSON.stringify(res.body).slice(0, 160)})`,
      };
    return { outcome: '4xx' };
  }
  if (
    c.endpoint === 'POST /v1/events' &&
    res.status === 200 &&
    res.body.accepted === 0 &&
    res.body.duplicates === 0 &&
    res.body.results.every((r: any) => r.status === 'rejected' && r.field)
  ) {
    const field = res.body.results[0].field;
    return {
      outcome: '200 all rejected',
      problem:
        expected && !expected.includes(field) ? `${at}: named ${field}, expected ${expected.join(' or ')}` : undefined,
    };
  }
  if (c.mayAccept) return { outcome: 'answered' };
  return { outcome: 'accepted', problem: `${at}: accepted ${res.status} ${JSON.stringify(res.body).slice(0, 200)}` };
}

/**
 * Refusals still missing in code this suite's owners do not own, named so that the suite stays a
 * gate for everything else. Their cases run after the "nothing stored" check (they may store),
 * and each gap must still reproduce: remove its entry with the fix.
 */
const KNOWN_GAPS: { endpoint: string; what: RegExp; why: string }[] = [];
const gapOf = (c: BadRequest) => KNOWN_GAPS.find((g) => g.endpoint === c.endpoint && g.what.test(c.what));

describe('bad input: every malformed request is refused with its field, nothing is stored, the service stays up', () => {
  let svc: RunningService;
  let project: TestProject;

  beforeAll(async () => {
    svc = await startService({
      RATE_LIMIT_PER_KEY_PER_SECOND: '0',
      TOLLGATE_SECRET_KEY: 'bad-input-secret-key-0123456789-0123456789',
    });
    project = await createProject(svc.url);
  });
  afterAll(() => svc.close());

  it('refuses every malformed request, in bodies, paths and query strings, at least 1,000 per body', async () => {
    const started = Date.now();
    // What the valid requests name: a reservation to release, a key to revoke, an exporter to operate.
    const reserved = await call(svc.url, 'POST', '/v1/guard/check', {
      token: project.key,
      body: {
        context: { resourceId: 'r' },
        estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 10, maxOutputTokens: 10 },
        reserve: true,
        stepId: 'bad-input-reservation',
      },
    });
    expect(reserved.body.reservation?.id).toBeDefined();
    const key = await call(svc.url, 'POST', `/v1/admin/projects/${project.id}/keys`, {
      token: TEST_ADMIN_TOKEN,
      body: { scopes: ['read'] },
    });
    expect(key.body.id).toBeDefined();
    const exporter = await call(svc.url, 'PUT', '/v1/exporters/bad-input-exporter', {
      token: project.key,
      body: { type: 'webhook', url: 'http://127.0.0.1:9/hook', signingSecret: 'bad-input-signing-secret-0123' },
    });
    expect(exporter.status).toBe(200);
    const endpoints = specs(project, { reservationId: reserved.body.reservation.id, keyId: key.body.id });
    const all = endpoints.flatMap(generate);
    const cases = all.filter((c) => !gapOf(c));
    const tokenOf = (c: BadRequest) => (/ \/v1\/admin/.test(c.endpoint) ? TEST_ADMIN_TOKEN : project.key);

    const before = await snapshot(svc);
    const tally = new Map<string, Map<string, Record<Outcome, number>>>();
    const problems: { kind: string; text: string }[] = [];
    let healthChecks = 0;
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const i = next++;
        const c = cases[i];
        const { outcome, problem } = judge(c, await send(svc.url, c, tokenOf(c)));
        if (problem) problems.push({ kind: `${c.endpoint} ${c.category}`, text: problem });
        const byCategory = tally.get(c.endpoint) ?? new Map();
        tally.set(c.endpoint, byCategory);
        const counts = byCategory.get(c.category) ?? {
          '4xx': 0,
          '200 all rejected': 0,
          answered: 0,
          '5xx': 0,
          accepted: 0,
        };
        byCategory.set(c.category, counts);
        counts[outcome]++;
        if (i % 500 === 0) {
          healthChecks++;
          const ready = await call(svc.url, 'GET', '/health/ready');
          if (ready.status !== 200)
            problems.push({ kind: 'readiness', text: `not ready after case ${i}: ${JSON.stringify(ready.body)}` });
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const after = await snapshot(svc);
    const ready = await call(svc.url, 'GET', '/health/ready');

    // The known gaps, one request at a time: each must still show.
    const reproduced = new Set<(typeof KNOWN_GAPS)[number]>();
    for (const c of all.filter(gapOf))
      if (judge(c, await send(svc.url, c, tokenOf(c))).problem) reproduced.add(gapOf(c)!);

    const sumOf = (n: Record<Outcome, number>) => OUTCOMES.reduce((total, o) => total + n[o], 0);
    const lines = ['', `endpoint | category | requests | ${OUTCOMES.join(' | ')}`];
    for (const [endpoint, byCategory] of tally) {
      let total = 0;
      for (const [category, n] of byCategory) {
        total += sumOf(n);
        lines.push(`${endpoint} | ${category} | ${sumOf(n)} | ${OUTCOMES.map((o) => n[o]).join(' | ')}`);
      }
      lines.push(`${endpoint} | TOTAL | ${total}`);
    }
    lines.push(
      `requests: ${cases.length} to ${tally.size} endpoints in ${Math.round((Date.now() - started) / 1000)} s; readiness checks during the run: ${healthChecks}, all ok: ${!problems.some((p) => p.kind === 'readiness')}; ready at the end: ${ready.status}`,
    );
    lines.push(`rows before: ${JSON.stringify(before)}`, `rows after:  ${JSON.stringify(after)}`);
    for (const gap of KNOWN_GAPS)
      lines.push(
        `known gap (${all.filter((c) => gapOf(c) === gap).length} requests, ${reproduced.has(gap) ? 'still there' : 'FIXED: remove it from KNOWN_GAPS'}): ${gap.endpoint} ${gap.what}: ${gap.why}`,
      );
    if (problems.length) {
      const byKind = new Map<string, number>();
      for (const { kind } of problems) byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
      lines.push(
        `${problems.length} problems, by endpoint and category:`,
        ...[...byKind].map(([kind, n]) => `  ${n} ${kind}`),
        'the first of them:',
        ...problems.slice(0, 80).map((p) => p.text),
      );
    }
    process.stdout.write(lines.join('\n') + '\n');

    // Every route with a body gets at least 1,000 cases; one with only path or query parameters, what they allow.
    for (const spec of endpoints) {
      const total = [...(tally.get(spec.name)?.values() ?? [])].reduce((n, c) => n + sumOf(c), 0);
      expect({
        endpoint: spec.name,
        enough: total >= (spec.body ? 1000 : Object.keys(spec.params).length ? 40 : 15),
      }).toEqual({ endpoint: spec.name, enough: true });
    }
    expect(tally.size).toBe(endpoints.length);
    expect(problems.map((p) => p.text)).toEqual([]);
    expect(after).toEqual(before);
    expect(ready.status).toBe(200);
    expect(KNOWN_GAPS.filter((g) => !reproduced.has(g)).map((g) => `fixed, remove from KNOWN_GAPS: ${g.why}`)).toEqual(
      [],
    );
  }, 600_000);

  it('stores injection strings in free-text fields verbatim, as data', async () => {
    const { INJECTIONS } = await import('./generate');
    const events = INJECTIONS.map((s, i) => ({
      eventId: `inj-${i}-${randomUUID()}`,
      occurredAt: new Date().toISOString(),
      traceId: s,
      resourceId: s,
      userId: s,
      entityType: 'agent',
      entityName: s,
      provider: s,
      model: s,
      labels: { [s]: s },
      tags: [s],
      usage: { inputTokens: 1, outputTokens: 1 },
    }));
    const res = await call(svc.url, 'POST', '/v1/events', { token: project.key, body: { events } });
    expect(res.body.accepted).toBe(INJECTIONS.length);
    const rows = await svc.prisma.$queryRawUnsafe<any[]>(
      `SELECT event_id, trace_id, resource_id, user_id, entity_name, provider, model, data FROM events WHERE project_id = $1 AND event_id LIKE 'inj-%' ORDER BY event_id`,
      project.id,
    );
    expect(rows).toHaveLength(INJECTIONS.length);
    for (const row of rows) {
      const s = INJECTIONS[Number(row.event_id.split('-')[1])];
      expect([row.trace_id, row.resource_id, row.user_id, row.entity_name, row.provider, row.model]).toEqual([
        s,
        s,
        s,
        s,
        s,
        s,
      ]);
    }
    // The tables the strings name are intact.
    const [{ n }] = await svc.prisma.$queryRawUnsafe<{ n: number }[]>('SELECT count(*)::int AS n FROM api_keys');
    expect(n).toBeGreaterThan(0);
  });
});
