import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

/**
 * Requests that once answered `500 internal`, each now refused with a 400 naming the whole field
 * path and saying why — or, for prototype member names, answered like any other name.
 */
const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];
const METRIC = 'mastra_model_total_input_tokens';
const PROTOTYPE_NAMES = ['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__'];
const NUL = 'a\u0000b';
const LONE_HIGH = 'a\ud800b';
const LONE_LOW = 'a\udfffb';

interface Case {
  what: string;
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  body?: unknown;
  field: string;
  message: RegExp;
}

const nulOrSurrogate = /must not contain (NUL \(U\+0000\)|a lone surrogate \(U\+D[89A-F][0-9A-F]{2}\))/;

function cases(): Case[] {
  const out: Case[] = [];
  // Test names show NUL and surrogates escaped.
  const metric = (route: string, body: unknown, field: string, message: RegExp) =>
    out.push({
      what: `${route} ${JSON.stringify(field).slice(1, -1)}`,
      method: 'POST',
      path: `/api/observability/metrics/${route}`,
      body,
      field,
      message,
    });
  const get = (path: string, field: string, message: RegExp) =>
    out.push({ what: `GET ${path.slice(0, 80)}`, method: 'GET', path, field, message });

  // NUL and lone surrogates in every kind of metric filter, in groupBy, in label maps (values and keys).
  for (const bad of [NUL, LONE_HIGH, LONE_LOW]) {
    for (const [filters, field] of [
      [{ model: bad }, 'filters.model'],
      [{ resourceId: bad }, 'filters.resourceId'],
      [{ traceIds: ['t', bad] }, 'filters.traceIds[1]'],
      [{ tags: [bad] }, 'filters.tags[0]'],
      [{ labels: { tier: bad } }, 'filters.labels.tier'],
      [{ labels: { [bad]: 'x' } }, `filters.labels.${bad}`],
      [{ entityType: bad }, 'filters.entityType'],
    ] as const) {
      metric('aggregate', { name: TOTALS, aggregation: 'sum', filters }, field, nulOrSurrogate);
    }
    metric('breakdown', { name: TOTALS, aggregation: 'sum', groupBy: ['model', bad] }, 'groupBy[1]', nulOrSurrogate);
    metric(
      'timeseries',
      { name: TOTALS, aggregation: 'sum', interval: '1h', groupBy: [bad] },
      'groupBy[0]',
      nulOrSurrogate,
    );
    metric(
      'percentiles',
      { name: METRIC, percentiles: [0.5], interval: '1h', filters: { model: bad } },
      'filters.model',
      nulOrSurrogate,
    );
  }
  // A query string carries NUL (%00); a lone surrogate is not encodable there (its UTF-8 is invalid and stays undecoded).
  get(
    `/api/observability/discovery/metric-label-values?metricName=${METRIC}&labelKey=a%00b`,
    'labelKey',
    nulOrSurrogate,
  );
  get(
    `/api/observability/discovery/metric-label-values?metricName=${METRIC}&labelKey=tier&prefix=a%00`,
    'prefix',
    nulOrSurrogate,
  );
  get('/api/observability/discovery/metric-names?prefix=%00', 'prefix', nulOrSurrogate);
  get('/api/observability/discovery/entity-names?entityType=agent%00', 'entityType', nulOrSurrogate);
  get('/api/observability/discovery/tags?entityType=%00', 'entityType', nulOrSurrogate);
  for (const route of ['decisions', 'exceeded', 'usage'])
    get(`/v1/guard/${route}?scopeKey=resource:a%00b`, 'scopeKey', nulOrSurrogate);
  get(`/v1/guard/usage?scopeKey=resource:${'x'.repeat(300)}`, 'scopeKey', /must be at most 256 characters/);
  get(`/v1/guard/decisions?scopeKey=thread:${'x'.repeat(300)}`, 'scopeKey', /must be at most 256 characters/);

  // Timestamps outside what PostgreSQL and Date both handle, and not ISO-8601 at all.
  const range = /must be between 2000-01-01 and 9999-12-31/;
  const iso = /must be an ISO-8601 timestamp/;
  for (const [timestamp, field, message] of [
    [{ start: '9999-12-31T00:00:00Z' }, 'filters.timestamp.start', range],
    [{ end: '9999-12-31T23:59:59.999Z' }, 'filters.timestamp.end', range],
    [{ start: '1999-12-31T23:59:59.999Z' }, 'filters.timestamp.start', range],
    [{ start: 8.64e15 }, 'filters.timestamp.start', iso],
    [{ end: -8.64e15 }, 'filters.timestamp.end', iso],
    [{ start: '+275760-09-13T00:00:00.000Z' }, 'filters.timestamp.start', iso],
    [{ start: '-000001-01-01T00:00:00.000Z' }, 'filters.timestamp.start', iso],
    [{ start: null }, 'filters.timestamp.start', iso],
  ] as const) {
    metric('aggregate', { name: TOTALS, aggregation: 'sum', filters: { timestamp } }, field, message);
  }
  const reaches = /outside 2000-01-01 to 9999-12-31/;
  metric(
    'aggregate',
    {
      name: TOTALS,
      aggregation: 'sum',
      filters: { timestamp: { start: '2000-01-03T00:00:00Z', end: '2000-01-04T00:00:00Z' } },
      comparePeriod: 'previous_week',
    },
    'comparePeriod',
    reaches,
  );
  metric(
    'aggregate',
    {
      name: TOTALS,
      aggregation: 'sum',
      filters: { timestamp: { start: '2000-06-01T00:00:00Z', end: '9000-01-01T00:00:00Z' } },
      comparePeriod: 'previous_period',
    },
    'comparePeriod',
    reaches,
  );

  // Lists beyond what one statement can hold (PostgreSQL's 1664 columns), and beyond their bounds.
  const keys = Array.from({ length: 1700 }, (_, i) => `k${i}`);
  metric('breakdown', { name: TOTALS, aggregation: 'sum', groupBy: keys }, 'groupBy', /must hold at most 16/);
  metric(
    'timeseries',
    { name: TOTALS, aggregation: 'sum', interval: '1h', groupBy: keys.slice(0, 17) },
    'groupBy',
    /must hold at most 16/,
  );
  metric(
    'percentiles',
    { name: METRIC, percentiles: keys.map(() => 0.5), interval: '1h' },
    'percentiles',
    /must hold at most 100/,
  );
  metric('aggregate', { name: keys.map(() => METRIC), aggregation: 'sum' }, 'name', /must hold at most 100/);
  metric(
    'aggregate',
    { name: TOTALS, aggregation: 'sum', filters: { tags: keys.slice(0, 65) } },
    'filters.tags',
    /must hold at most 64/,
  );
  metric(
    'aggregate',
    {
      name: TOTALS,
      aggregation: 'sum',
      filters: { labels: Object.fromEntries(keys.slice(0, 65).map((k) => [k, 'v'])) },
    },
    'filters.labels',
    /must hold at most 64/,
  );

  metric(
    'aggregate',
    { name: TOTALS, aggregation: 'sum', filters: { name: ["' OR '1'='1"] } },
    'filters.name[0]',
    /is not a known metric name/,
  );

  // The boundary is the same for every route: a body, a path or a query of any of them.
  out.push({
    what: 'exporter url with NUL',
    method: 'PUT',
    path: '/v1/exporters/no-500',
    body: { type: 'webhook', url: `http://127.0.0.1:9/${NUL}`, signingSecret: 'x'.repeat(20) },
    field: 'url',
    message: nulOrSurrogate,
  });
  out.push({
    what: 'exporter header value with a lone surrogate',
    method: 'PUT',
    path: '/v1/exporters/no-500',
    body: { type: 'otlp', endpoint: 'http://127.0.0.1:9', headers: { 'x-key': LONE_HIGH } },
    field: 'headers.x-key',
    message: nulOrSurrogate,
  });
  out.push({
    what: 'event with NUL',
    method: 'POST',
    path: '/v1/events',
    body: { events: [stepEvent({ model: NUL })] },
    field: 'events[0].model',
    message: nulOrSurrogate,
  });
  out.push({
    what: 'policy path with NUL',
    method: 'PUT',
    path: '/v1/policies/a%00b',
    body: { scope: 'resource', maxCost: 1 },
    field: 'name',
    message: nulOrSurrogate,
  });
  return out;
}

describe('no input is a 500', () => {
  let svc: RunningService;
  let project: TestProject;

  beforeAll(async () => {
    svc = await startService({
      RATE_LIMIT_PER_KEY_PER_SECOND: '0',
      TOLLGATE_SECRET_KEY: 'no-500-secret-key-0123456789-0123456789',
    });
    project = await createProject(svc.url);
    const labels = Object.fromEntries(PROTOTYPE_NAMES.filter((n) => n !== '__proto__').map((n) => [n, `${n}-value`]));
    const res = await call(svc.url, 'POST', '/v1/events', {
      token: project.key,
      body: { events: [stepEvent({ labels, usage: { inputTokens: 7, outputTokens: 3 } })] },
    });
    expect(res.body.accepted).toBe(1);
  });
  afterAll(() => svc.close());

  it.each(cases().map((c) => [c.what, c] as const))('%s: 400 naming the field', async (_, c) => {
    const before = await svc.prisma.$queryRawUnsafe<{ n: number }[]>(
      'SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM exporters) + (SELECT count(*) FROM policies) AS n',
    );
    const res = await call(svc.url, c.method, c.path, { token: project.key, body: c.body });
    expect({ status: res.status, field: res.body?.field }).toEqual({ status: 400, field: c.field });
    expect(res.body.message).toMatch(c.message);
    expect(res.body.message.startsWith(c.field)).toBe(true);
    const after = await svc.prisma.$queryRawUnsafe<{ n: number }[]>(
      'SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM exporters) + (SELECT count(*) FROM policies) AS n',
    );
    expect(after).toEqual(before);
  });

  // A prototype member's name is a name like any other: a label key to group by, a value to list.
  it.each(PROTOTYPE_NAMES)('groupBy %s is a label key', async (name) => {
    const value = name === '__proto__' ? null : `${name}-value`;
    const breakdown = await call(svc.url, 'POST', '/api/observability/metrics/breakdown', {
      token: project.key,
      body: { name: [METRIC], aggregation: 'sum', groupBy: [name] },
    });
    expect(breakdown.status).toBe(200);
    expect(breakdown.body.groups).toHaveLength(1);
    expect(Object.entries(breakdown.body.groups[0].dimensions)).toEqual([[name, value]]);
    expect(breakdown.body.groups[0].value).toBe(7);
    const series = await call(svc.url, 'POST', '/api/observability/metrics/timeseries', {
      token: project.key,
      body: { name: [METRIC], aggregation: 'sum', interval: '1d', groupBy: [name, 'model'] },
    });
    expect(series.status).toBe(200);
    expect(series.body.series.map((s: { name: string }) => s.name)).toEqual([`${value ?? ''}|gpt-4o`]);
    const filtered = await call(svc.url, 'POST', '/api/observability/metrics/aggregate', {
      token: project.key,
      body: {
        name: [METRIC],
        aggregation: 'sum',
        filters: {
          labels: {
            [name === '__proto__' ? 'constructor' : name]: `${name === '__proto__' ? 'constructor' : name}-value`,
          },
        },
      },
    });
    expect(filtered.body.value).toBe(7);
    const values = await call(
      svc.url,
      'GET',
      `/api/observability/discovery/metric-label-values?metricName=${METRIC}&labelKey=${name}`,
      { token: project.key },
    );
    expect(values.status).toBe(200);
    expect(values.body.values).toEqual(value === null ? [] : [value]);
    const names = await call(svc.url, 'GET', `/api/observability/discovery/entity-names?entityType=${name}`, {
      token: project.key,
    });
    expect(names.status).toBe(200);
    expect(names.body.names).toEqual([]);
  });

  it.each(PROTOTYPE_NAMES)('%s: an unknown metric name, an unknown query parameter', async (name) => {
    const unknown = await call(svc.url, 'GET', `/api/observability/discovery/metric-label-keys?metricName=${name}`, {
      token: project.key,
    });
    expect({ status: unknown.status, field: unknown.body.field }).toEqual({ status: 400, field: 'metricName' });
    const param = await call(svc.url, 'GET', `/api/observability/discovery/environments?${name}=1`, {
      token: project.key,
    });
    expect({ status: param.status, field: param.body.field }).toEqual({ status: 400, field: name });
    const agg = await call(svc.url, 'POST', '/api/observability/metrics/aggregate', {
      token: project.key,
      body: { name: [name], aggregation: 'sum' },
    });
    expect({ status: agg.status, field: agg.body.field }).toEqual({ status: 400, field: 'name[0]' });
  });

  it('answers a filters.name that leaves no metric with no value (it once built `IN ()`)', async () => {
    const res = await call(svc.url, 'POST', '/api/observability/metrics/aggregate', {
      token: project.key,
      body: { name: [METRIC], aggregation: 'sum', filters: { name: ['mastra_model_total_output_tokens'] } },
    });
    expect({ status: res.status, value: res.body.value }).toEqual({ status: 200, value: null });
    const pct = await call(svc.url, 'POST', '/api/observability/metrics/percentiles', {
      token: project.key,
      body: { name: METRIC, percentiles: [0.5], interval: '1h', filters: { name: ['mastra_model_duration_ms'] } },
    });
    expect({ status: pct.status, series: pct.body.series }).toEqual({
      status: 200,
      series: [{ percentile: 0.5, points: [] }],
    });
  });

  // Static files are looked up by name too: a prototype member is no file (404, like any unknown name).
  it.each([
    '/dashboard/vendor/__proto__',
    '/dashboard/vendor/toString',
    '/dashboard/assets/constructor',
    '/docs/assets/toString',
    '/docs/assets/__proto__',
    '/docs/assets/hasOwnProperty',
  ])('%s is not found', async (path) => {
    const res = await call(svc.url, 'GET', path);
    expect(res.status).toBe(404);
  });
});
