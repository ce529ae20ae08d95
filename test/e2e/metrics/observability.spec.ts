import { EVENT_SELECT } from '@tollgate/database';
import { MetricsProjector } from '@tollgate/usage-metrics';
import { call, createProject, type TestProject } from '../../support/http';
import { startService, type RunningService } from '../../support/service';
import {
  expectClose,
  recordsOf,
  refAggregate,
  refBreakdown,
  refPercentiles,
  refTimeSeries,
  type RefRecord,
} from './reference';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Deterministic pseudo-random numbers, so a failure can be replayed. */
function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MODELS = [
  { provider: 'openai', model: 'gpt-4o' },
  { provider: 'openai', model: 'gpt-4o-mini' },
  { provider: 'anthropic', model: 'claude-3-5-haiku-latest' },
  { provider: 'acme', model: 'acme-large-9' }, // unpriced
];

/** A month of step events of one project: several models, scopes, units, labels and tags. */
function generateEvents(seed: number, count: number, now: number, prefix: string) {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)];
  return Array.from({ length: count }, (_, i) => {
    const m = pick(MODELS);
    const input = 50 + Math.floor(rnd() * 5000);
    const output = Math.floor(rnd() * 1500);
    const cacheRead = rnd() < 0.3 ? Math.floor(rnd() * input * 0.5) : 0;
    const reasoning = rnd() < 0.2 ? Math.floor(rnd() * output) : 0;
    const thread = `thread-${Math.floor(rnd() * 8)}`;
    const costKind = rnd();
    const event: Record<string, any> = {
      eventId: `${prefix}-${i}`,
      // A few events sit exactly on bucket boundaries; the rest anywhere in the last 30 days.
      occurredAt: new Date(
        i % 17 === 0 ? Math.floor((now - rnd() * 29 * DAY) / HOUR) * HOUR : now - 1000 - Math.floor(rnd() * 30 * DAY),
      ).toISOString(),
      traceId: `trace-${Math.floor(i / 3)}`,
      runId: `run-${Math.floor(i / 3)}`,
      threadId: thread,
      resourceId: `resource-${Math.floor(rnd() * 4)}`,
      userId: `user-${Math.floor(rnd() * 3)}`,
      organizationId: `org-${Math.floor(rnd() * 2)}`,
      sessionId: rnd() < 0.8 ? `session-${Math.floor(rnd() * 5)}` : undefined,
      entityType: pick(['agent', 'agent', 'tool', 'workflow_step']),
      entityName: pick(['support-agent', 'billing-agent', 'search']),
      environment: pick(['production', 'staging', undefined]),
      serviceName: pick(['api', 'jobs']),
      provider: m.provider,
      model: m.model,
      usage: {
        inputTokens: input,
        outputTokens: output,
        ...(cacheRead ? { cacheReadTokens: cacheRead } : {}),
        ...(reasoning ? { reasoningTokens: reasoning } : {}),
        ...(rnd() < 0.05 ? { audioInputTokens: Math.floor(input / 10) } : {}),
      },
      ...(costKind < 0.15
        ? { cost: { amount: Math.round(rnd() * 100000) / 1e6, currency: 'EUR' } }
        : costKind < 0.25
          ? { cost: { amount: Math.round(rnd() * 100000) / 1e6, currency: 'USD', source: 'openrouter' } }
          : {}),
      ...(rnd() < 0.7 ? { durationMs: Math.round(rnd() * 5_000_000) / 1000 } : {}),
      labels: { tier: pick(['free', 'pro']), ...(rnd() < 0.5 ? { region: pick(['eu', 'us']) } : {}) },
      tags: ['a', 'b', 'c'].filter(() => rnd() < 0.5),
    };
    for (const k of Object.keys(event)) if (event[k] === undefined) delete event[k];
    return event;
  });
}

describe('Mastra-compatible metric queries', () => {
  let svc: RunningService;
  let a: TestProject;
  let b: TestProject;
  let projector: MetricsProjector;
  const now = Date.now();

  const ingest = async (project: TestProject, events: any[]) => {
    for (let i = 0; i < events.length; i += 500) {
      const res = await call(svc.url, 'POST', '/v1/events', {
        token: project.key,
        body: { events: events.slice(i, i + 500) },
      });
      expect(res.status).toBe(200);
      expect(res.body.rejected).toBe(0);
    }
  };
  const records = async (project: TestProject): Promise<RefRecord[]> =>
    recordsOf(
      await svc.prisma.$queryRawUnsafe<any[]>(`SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1`, project.id),
    );
  const post = (project: TestProject, route: string, body: unknown) =>
    call(svc.url, 'POST', `/api/observability/metrics/${route}`, { token: project.key, body });
  const catchUp = async () => {
    for (;;) if ((await projector.catchUp({ batchSize: 700 })).caughtUp) return;
  };

  beforeAll(async () => {
    svc = await startService();
    projector = svc.app.get(MetricsProjector);
    [a, b] = await Promise.all([createProject(svc.url), createProject(svc.url)]);
    // B uses the same scope ids as A: isolation must come from the project, not from the ids.
    // Sequentially: concurrent first inserts into a new month race on partition creation (foundation issue).
    await ingest(a, generateEvents(1, 1200, now, 'a'));
    await ingest(b, generateEvents(2, 400, now, 'b'));
  }, 120_000);
  afterAll(() => svc.close());

  /** Ranges that cut through day, hour and minute buckets, with every flag combination. */
  const at = (ms: number) => new Date(ms).toISOString();
  const cut = now - 9 * DAY - 3 * HOUR - 17 * 60_000 - 12_345;
  const ranges = [
    { start: at(now - 30 * DAY) },
    { start: at(cut), end: at(cut + 4 * DAY + 5 * HOUR + 31 * 60_000 + 777) },
    { start: at(cut), end: at(cut + 47 * 60_000 + 5), startExclusive: true, endExclusive: true },
    { start: at(Math.floor(cut / HOUR) * HOUR), end: at(Math.floor(cut / HOUR) * HOUR + 6 * HOUR), endExclusive: true },
    { end: at(now - 2 * DAY - 123) },
  ];
  const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];

  function suite(): { route: string; body: any; ref: (r: RefRecord[]) => unknown }[] {
    const cases: { route: string; body: any; ref: (r: RefRecord[]) => unknown }[] = [];
    const agg = (body: any) => cases.push({ route: 'aggregate', body, ref: (r) => refAggregate(r, body) });
    for (const timestamp of ranges) {
      for (const aggregation of ['sum', 'avg', 'min', 'max', 'count', 'last'])
        agg({ name: TOTALS, aggregation, filters: { timestamp } });
      agg({ name: ['mastra_model_duration_ms'], aggregation: 'avg', filters: { timestamp } });
      agg({ name: TOTALS, aggregation: 'count_distinct', distinctColumn: 'model', filters: { timestamp } });
      agg({ name: TOTALS, aggregation: 'sum', filters: { timestamp, resourceId: 'resource-1', entityType: 'agent' } });
      agg({ name: TOTALS, aggregation: 'sum', filters: { timestamp, costUnit: 'EUR' } });
      cases.push({
        route: 'timeseries',
        body: { name: TOTALS, interval: '1h', aggregation: 'sum', filters: { timestamp } },
        ref: (r) => refTimeSeries(r, { name: TOTALS, interval: '1h', aggregation: 'sum', filters: { timestamp } }),
      });
      const bd = {
        name: TOTALS,
        groupBy: ['provider', 'model'],
        aggregation: 'sum',
        filters: { timestamp, entityType: 'agent' },
        limit: 10,
      };
      cases.push({ route: 'breakdown', body: bd, ref: (r) => refBreakdown(r, bd) });
    }
    const mid = { start: at(cut), end: at(cut + 3 * DAY + 2 * HOUR + 5 * 60_000 + 99) };
    // Mastra's TokenCostControl: resource scope, 30-day window, agents only.
    agg({
      name: TOTALS,
      aggregation: 'sum',
      filters: { resourceId: 'resource-2', entityType: 'agent', timestamp: { start: at(now - 30 * DAY) } },
    });
    agg({ name: TOTALS, aggregation: 'sum', filters: { traceId: 'trace-7', entityType: 'agent' } });
    for (const comparePeriod of ['previous_period', 'previous_day', 'previous_week']) {
      agg({ name: TOTALS, aggregation: 'sum', filters: { timestamp: mid }, comparePeriod });
      agg({
        name: ['mastra_model_total_input_tokens'],
        aggregation: 'avg',
        filters: { timestamp: mid, model: 'gpt-4o' },
        comparePeriod,
      });
    }
    agg({ name: TOTALS, aggregation: 'sum', filters: { timestamp: mid, labels: { tier: 'pro' } } });
    agg({ name: TOTALS, aggregation: 'sum', filters: { timestamp: mid, tags: ['a', 'b'] } });
    agg({ name: TOTALS, aggregation: 'max', filters: { threadId: 'thread-3', userId: 'user-1' } });
    agg({
      name: TOTALS,
      aggregation: 'count',
      filters: { traceIds: ['trace-1', 'trace-2', 'trace-300'], runId: 'run-2' },
    });
    agg({ name: TOTALS, aggregation: 'count_distinct', distinctColumn: 'resourceId', filters: { timestamp: mid } });
    agg({
      name: [
        'mastra_model_input_cache_read_tokens',
        'mastra_model_output_reasoning_tokens',
        'mastra_model_input_text_tokens',
      ],
      aggregation: 'sum',
    });
    agg({
      name: ['mastra_model_output_text_tokens', 'mastra_model_input_audio_tokens'],
      aggregation: 'count_distinct',
      distinctColumn: 'name',
    });
    agg({ name: ['mastra_model_output_audio_tokens'], aggregation: 'sum' });
    agg({
      name: TOTALS,
      aggregation: 'sum',
      filters: { name: ['mastra_model_total_output_tokens'], environment: 'production', serviceName: 'jobs' },
    });
    agg({ name: TOTALS, aggregation: 'sum', filters: { requestId: 'req-1' } });
    const breakdowns = [
      { name: TOTALS, groupBy: ['model'], aggregation: 'sum' },
      { name: TOTALS, groupBy: ['resourceId'], aggregation: 'avg', orderDirection: 'ASC', filters: { timestamp: mid } },
      { name: TOTALS, groupBy: ['tier', 'name'], aggregation: 'count', filters: { timestamp: mid } },
      { name: ['mastra_model_duration_ms'], groupBy: ['entityType'], aggregation: 'max' },
      {
        name: TOTALS,
        groupBy: ['costUnit'],
        aggregation: 'count_distinct',
        distinctColumn: 'threadId',
        filters: { timestamp: mid },
      },
      { name: TOTALS, groupBy: ['sessionId'], aggregation: 'last', limit: 3 },
    ];
    for (const body of breakdowns) cases.push({ route: 'breakdown', body, ref: (r) => refBreakdown(r, body) });
    const series = [
      { name: TOTALS, interval: '1d', aggregation: 'sum', groupBy: ['model'] },
      {
        name: TOTALS,
        interval: '15m',
        aggregation: 'count',
        filters: { timestamp: { start: at(cut), end: at(cut + 5 * HOUR) } },
      },
      { name: TOTALS, interval: '1h', aggregation: 'sum', groupBy: ['resourceId'], filters: { timestamp: mid } },
      {
        name: TOTALS,
        interval: '5m',
        aggregation: 'sum',
        groupBy: ['userId'],
        filters: { timestamp: { start: at(cut), end: at(cut + 7 * HOUR) } },
      },
      { name: ['mastra_model_duration_ms'], interval: '1d', aggregation: 'avg', filters: { labels: { region: 'eu' } } },
      { name: TOTALS, interval: '1h', aggregation: 'sum', filters: { requestId: 'nothing' } },
    ];
    for (const body of series) cases.push({ route: 'timeseries', body, ref: (r) => refTimeSeries(r, body) });
    const percentiles = [
      { name: 'mastra_model_duration_ms', percentiles: [0, 0.5, 0.9, 0.99, 1], interval: '1d' },
      {
        name: 'mastra_model_total_input_tokens',
        percentiles: [0.25, 0.75],
        interval: '1h',
        filters: { timestamp: mid, model: 'gpt-4o-mini' },
      },
    ];
    for (const body of percentiles) cases.push({ route: 'percentiles', body, ref: (r) => refPercentiles(r, body) });
    return cases;
  }

  async function checkAll(project: TestProject, expectLagEvents?: (n: number) => void) {
    const recs = await records(project);
    for (const c of suite()) {
      const res = await post(project, c.route, c.body);
      if (res.status !== 200)
        throw new Error(`${c.route} ${JSON.stringify(c.body)}: ${res.status} ${JSON.stringify(res.body)}`);
      try {
        expectClose(res.body, c.ref(recs));
      } catch (err) {
        throw new Error(`${c.route} ${JSON.stringify(c.body)}: ${(err as Error).message}`);
      }
      expect(Number(res.headers.get('x-tollgate-projection-lag-events'))).toBe(res.body.lag.events);
      expectLagEvents?.(res.body.lag.events);
    }
  }

  it('answers every route exactly from the log before the projection ran, and says how far behind it is', async () => {
    // The lag is the project's own: its 1200 unprojected events, not B's 400 as well.
    await checkAll(a, (n) => expect(n).toBe(1200));
  }, 120_000);

  it('answers the same from the rollups once the projection caught up (lag 0), for each project alone', async () => {
    await catchUp();
    await checkAll(a, (n) => expect(n).toBe(0));
    await checkAll(b, (n) => expect(n).toBe(0));
  }, 120_000);

  it('combines rollups with the unprojected tail of the log', async () => {
    await ingest(a, generateEvents(3, 150, now, 'a-late'));
    await checkAll(a, (n) => expect(n).toBe(150));
    await catchUp();
  }, 120_000);

  const snapshot = () =>
    svc.prisma.$queryRawUnsafe<any[]>(`
        SELECT 'p' AS cube, r.project_id, r.granularity, r.name, r.bucket_start, d.key, r.count::text, r.sum::text, r.min, r.max, r.cost_micros::text, r.cost_count::text
          FROM metric_rollups r JOIN metric_dimensions d ON d.id = r.dims_id
        UNION ALL
        SELECT 's', r.project_id, 'h', r.name, r.bucket_start, d.key, r.count::text, r.sum::text, r.min, r.max, r.cost_micros::text, r.cost_count::text
          FROM metric_scope_rollups r JOIN metric_dimensions d ON d.id = r.dims_id
        ORDER BY 1, 2, 3, 4, 5, 6`);

  it('replays to rollups identical to the incremental projection', async () => {
    await catchUp();
    const before = await snapshot();
    expect(before.length).toBeGreaterThan(1000);
    const replayed = await projector.replay({ batchSize: 1000 });
    expect(replayed.caughtUp).toBe(true);
    expect(await snapshot()).toEqual(before);
  }, 120_000);

  it('replays while ingest goes on, and two projectors at once never count an event twice', async () => {
    const c = await createProject(svc.url);
    const events = generateEvents(4, 600, now, 'c');
    // Ingest into C while the replay runs; a second projector (another worker process) competes.
    const other = new MetricsProjector(svc.prisma);
    const [replayed] = await Promise.all([
      projector.replay({ batchSize: 300 }),
      (async () => {
        for (let i = 0; i < events.length; i += 100) await ingest(c, events.slice(i, i + 100));
      })(),
      (async () => {
        for (let i = 0; i < 20; i++) await other.catchUp({ batchSize: 200 });
      })(),
    ]);
    expect(replayed.caughtUp).toBe(true);
    await Promise.all([catchUp(), other.catchUp({ batchSize: 500 })]);
    await catchUp();
    await checkAll(c, (n) => expect(n).toBe(0));
    const concurrent = await snapshot();
    await projector.replay({ batchSize: 2000 });
    expect(await snapshot()).toEqual(concurrent);
  }, 120_000);

  it('answers the discovery routes with Mastra shapes from the flat query strings its client sends', async () => {
    const get = (path: string, project = a) =>
      call(svc.url, 'GET', `/api/observability/discovery/${path}`, { token: project.key });
    const recs = await records(a);
    const sorted = (xs: Iterable<string | null>) => [...new Set([...xs].filter((x): x is string => x !== null))].sort();
    expect((await get('metric-names')).body.names).toEqual(sorted(recs.map((r) => r.name)));
    expect((await get('metric-names?prefix=mastra_model_input_&limit=2')).body.names).toEqual(
      sorted(recs.map((r) => r.name))
        .filter((n) => n.startsWith('mastra_model_input_'))
        .slice(0, 2),
    );
    expect((await get('metric-label-keys?metricName=mastra_model_total_input_tokens')).body).toMatchObject({
      keys: ['region', 'tier'],
    });
    expect(
      (await get('metric-label-values?metricName=mastra_model_total_input_tokens&labelKey=tier')).body.values,
    ).toEqual(['free', 'pro']);
    expect(
      (await get('metric-label-values?metricName=mastra_model_total_input_tokens&labelKey=region&prefix=e&limit=5'))
        .body.values,
    ).toEqual(['eu']);
    expect((await get('entity-types')).body.entityTypes).toEqual(sorted(recs.map((r) => r.row.entity_type)));
    expect((await get('entity-names?entityType=tool')).body.names).toEqual(
      sorted(recs.filter((r) => r.row.entity_type === 'tool').map((r) => r.row.entity_name)),
    );
    expect((await get('service-names')).body.serviceNames).toEqual(['api', 'jobs']);
    expect((await get('environments')).body.environments).toEqual(['production', 'staging']);
    expect((await get('tags')).body.tags).toEqual(['a', 'b', 'c']);
    const res = await get('tags?entityType=agent');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-tollgate-projection-lag-ms')).not.toBeNull();
    expect((await get('metric-label-keys?metricName=nope')).body).toMatchObject({
      code: 'validation_failed',
      field: 'metricName',
    });
  });

  it('never shows a project another project’s metrics', async () => {
    const c = await createProject(svc.url);
    const res = await post(c, 'aggregate', { name: TOTALS, aggregation: 'sum', filters: { resourceId: 'resource-1' } });
    expect(res.body).toMatchObject({ value: null, estimatedCost: null, costUnit: null });
    expect((await post(c, 'breakdown', { name: TOTALS, groupBy: ['model'], aggregation: 'sum' })).body.groups).toEqual(
      [],
    );
    expect(
      (await call(svc.url, 'GET', '/api/observability/discovery/metric-names', { token: c.key })).body.names,
    ).toEqual([]);
  });

  it('names the field of a bad request, and needs the read scope', async () => {
    const bad = async (body: unknown, field: string) => {
      const res = await post(a, 'aggregate', body);
      expect(res.status).toBe(400);
      expect(res.body.field).toBe(field);
    };
    await bad({ name: ['mastra_model_total_tokens'], aggregation: 'sum' }, 'name[0]');
    await bad({ name: TOTALS, aggregation: 'sum', filters: { resource: 'x' } }, 'filters.resource');
    await bad({ name: TOTALS, aggregation: 'sum', filters: { rootEntityType: 'agent' } }, 'filters.rootEntityType');
    await bad({ name: TOTALS, aggregation: 'count_distinct' }, 'distinctColumn');
    await bad({ name: [], aggregation: 'sum' }, 'name');
    await bad(
      { name: TOTALS, aggregation: 'sum', filters: { timestamp: { start: 'yesterday' } } },
      'filters.timestamp.start',
    );
    expect(
      (await post(a, 'breakdown', { name: TOTALS, groupBy: ['model'], aggregation: 'sum', limit: 1001 })).body.field,
    ).toBe('limit');
    const ingestOnly = await createProject(svc.url, ['ingest']);
    expect((await post(ingestOnly, 'aggregate', { name: TOTALS, aggregation: 'sum' })).status).toBe(403);
    expect(
      (
        await call(svc.url, 'POST', '/api/observability/metrics/aggregate', {
          body: { name: TOTALS, aggregation: 'sum' },
        })
      ).status,
    ).toBe(401);
  });

  it('documents the routes in the OpenAPI document', async () => {
    const doc = await call(svc.url, 'GET', '/docs/json');
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining([
        '/api/observability/metrics/aggregate',
        '/api/observability/discovery/metric-label-values',
      ]),
    );
  });
});
