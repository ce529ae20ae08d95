import { EVENT_SELECT } from '@tollgate/database';
import { MetricsProjector } from '@tollgate/usage-metrics';
import { randomUUID } from 'node:crypto';
import { COMMANDS } from '../../apps/cli/src/commands';
import { putPriceResponse } from '../../libs/ledger/src/prices/prices.controller';
import { repriceResponse } from '../../libs/ledger/src/reprice/reprice.schemas';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];

// A model the catalog has no price for: its steps are stored unpriced.
const UNKNOWN = { provider: 'acme', model: 'acme-large' };
// The override below: 2 / M input, 8 / M output, 0.5 / M cache reads. The step's usage:
// 1000 input of which 400 cache reads, 200 output → 600 × 2 + 400 × 0.5 = 1400 input, 200 × 8 = 1600 output.
const RATES = { inputPerMillion: 2, outputPerMillion: 8, cacheReadPerMillion: 0.5 };
const USAGE = { inputTokens: 1000, outputTokens: 200, cacheReadTokens: 400 };
const STEP_MICROS = 3000;

describe('repricing stored steps (POST /v1/prices/reprice)', () => {
  let svc: RunningService;
  let projector: MetricsProjector;
  // Two whole hours back: the guard reads that hour from its counters in every window.
  const at = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR + 10 * 60_000;

  beforeAll(async () => {
    svc = await startService();
    projector = svc.app.get(MetricsProjector);
  });
  afterAll(() => svc.close());

  const api = (p: TestProject, method: string, path: string, body?: unknown) =>
    call(svc.url, method, path, { token: p.key, body });
  const ingest = async (p: TestProject, events: unknown[]) => {
    const res = await api(p, 'POST', '/v1/events', { events });
    expect(res.body.accepted).toBe(events.length);
  };
  const putPrice = (
    p: TestProject,
    body: Record<string, unknown>,
    provider = UNKNOWN.provider,
    model = UNKNOWN.model,
  ) => api(p, 'PUT', `/v1/prices/${provider}/${model}`, body);
  const reprice = (p: TestProject, body: Record<string, unknown>) => api(p, 'POST', '/v1/prices/reprice', body);
  const range = { from: new Date(at - DAY).toISOString(), to: new Date(Date.now() + 60_000).toISOString() };
  const catchUp = async () => {
    for (;;) if ((await projector.catchUp()).caughtUp) return;
  };
  const logOf = (p: TestProject, type: string) =>
    svc.prisma.$queryRawUnsafe<any[]>(
      `SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1 AND type = $2 ORDER BY position`,
      p.id,
      type,
    );
  const guardUsage = async (p: TestProject, context: Record<string, string>) => {
    const res = await api(p, 'POST', '/v1/guard/check', {
      context,
      limits: [
        { scope: 'resource', window: '24h', maxCost: 1 },
        { scope: 'resource', window: '7d', maxCost: 1 },
        { scope: 'run', maxCost: 1 },
      ],
    });
    expect(res.status).toBe(200);
    return res.body;
  };
  /** The guard's counters of a project, without the rows a correction emptied, comparable across projects. */
  const countersOf = (p: TestProject) =>
    svc.prisma.$queryRawUnsafe<any[]>(
      `SELECT scope, scope_id, granularity::text, bucket_start, cost_unit, input_tokens::int, output_tokens::int, cost_micros::int, unpriced_events::int, events::int
         FROM usage_counters WHERE project_id = $1 AND (input_tokens, output_tokens, cost_micros, unpriced_events, events) <> (0, 0, 0, 0, 0)
        ORDER BY scope, scope_id, granularity, bucket_start, cost_unit`,
      p.id,
    );
  /** The metric rollups of a project by dimension tuple, comparable across projects. */
  const rollupsOf = (p: TestProject) =>
    svc.prisma.$queryRawUnsafe<any[]>(
      `SELECT r.granularity, r.name, r.bucket_start, d.key, r.count::int, r.sum::text, r.min, r.max, r.cost_micros::int, r.cost_count::int
         FROM metric_rollups r JOIN metric_dimensions d ON d.id = r.dims_id WHERE r.project_id = $1
       UNION ALL
       SELECT 'scope', r.name, r.bucket_start, d.key, r.count::int, r.sum::text, r.min, r.max, r.cost_micros::int, r.cost_count::int
         FROM metric_scope_rollups r JOIN metric_dimensions d ON d.id = r.dims_id WHERE r.project_id = $1
        ORDER BY 1, 2, 3, 4`,
      p.id,
    );

  it('prices a step stored unpriced with an override from before it: guard, counters and metrics see the new cost, the original stays', async () => {
    const p = await createProject(svc.url);
    // The same step priced at ingest, in a project that had the price first: what the correction must amount to.
    const twin = await createProject(svc.url);
    const resourceId = `r-${randomUUID()}`;
    const traceId = `t-${randomUUID()}`;
    const step = stepEvent({
      ...UNKNOWN,
      resourceId,
      traceId,
      threadId: `th-${randomUUID()}`,
      occurredAt: new Date(at).toISOString(),
      usage: USAGE,
    });
    await ingest(p, [step]);
    expect((await putPrice(twin, { effectiveFrom: new Date(at - HOUR).toISOString(), ...RATES })).status).toBe(200);
    await ingest(twin, [step]);

    const [stored] = await logOf(p, 'StepUsageRecorded');
    expect(stored).toMatchObject({ cost_micros: null, unpriced: true });
    const before = await guardUsage(p, { resourceId, traceId });
    expect(before.decision).toBe('deny');
    expect(before.usage[`resource:${resourceId}@24h`]).toMatchObject({
      totalTokens: 1200,
      estimatedCost: 0,
      unpricedEvents: 1,
    });

    // The override from before the step answers that a stored step is priced otherwise, and names the call.
    const put = await putPrice(p, { effectiveFrom: new Date(at - HOUR).toISOString(), ...RATES });
    expect(put.status).toBe(200);
    // The answers are the OpenAPI document's: strict schemas, so an undocumented field fails.
    expect(putPriceResponse.parse(put.body)).toEqual(put.body);
    expect(put.body.warnings).toEqual([
      expect.objectContaining({
        code: 'stored_steps_priced_otherwise',
        steps: 1,
        message: expect.stringContaining('POST /v1/prices/reprice'),
        reprice: {
          method: 'POST',
          path: '/v1/prices/reprice',
          body: {
            from: new Date(at - HOUR).toISOString(),
            to: new Date(at + 1).toISOString(),
            provider: 'acme',
            model: 'acme-large',
          },
        },
      }),
    ]);

    // A dry run reports the count and the delta, and appends nothing.
    const dry = await reprice(p, { ...range, dryRun: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({
      dryRun: true,
      scanned: 1,
      repriced: 1,
      unchanged: 0,
      providerReported: 0,
      newlyPriced: 1,
      deltaByUnit: { USD: { costMicros: STEP_MICROS, cost: STEP_MICROS / 1e6 } },
    });
    expect(repriceResponse.parse(dry.body)).toEqual(dry.body);
    expect(await logOf(p, 'StepRepriced')).toEqual([]);
    expect((await guardUsage(p, { resourceId, traceId })).usage[`resource:${resourceId}@24h`]).toMatchObject({
      estimatedCost: 0,
      unpricedEvents: 1,
    });

    const done = await reprice(p, range);
    expect(done.body).toMatchObject({
      dryRun: false,
      scanned: 1,
      repriced: 1,
      newlyPriced: 1,
      deltaByUnit: { USD: { costMicros: STEP_MICROS } },
      batches: 1,
    });
    const [correction] = await logOf(p, 'StepRepriced');
    expect(correction).toMatchObject({
      event_id: `tg:reprice:${step.eventId}:1`,
      occurred_at: new Date(at),
      resource_id: resourceId,
      trace_id: traceId,
      provider: 'acme',
      model: 'acme-large',
      input_tokens: 1000n,
      cost_micros: BigInt(STEP_MICROS),
      input_cost_micros: 1400n,
      output_cost_micros: 1600n,
      cost_unit: 'USD',
      cost_source: 'override',
      price_id: `override:${put.body.id}`,
      unpriced: false,
      data: {
        stepEventId: step.eventId,
        stepPosition: String(stored.position),
        sequence: 1,
        old: {
          costMicros: null,
          inputCostMicros: null,
          outputCostMicros: null,
          costUnit: null,
          priceId: null,
          source: null,
        },
        new: {
          costMicros: STEP_MICROS,
          inputCostMicros: 1400,
          outputCostMicros: 1600,
          costUnit: 'USD',
          priceId: `override:${put.body.id}`,
          source: 'override',
        },
      },
    });
    // The original event is never rewritten.
    expect((await logOf(p, 'StepUsageRecorded'))[0]).toEqual(stored);

    // The guard: every window and the run see the new cost, and no unpriced step is left.
    const after = await guardUsage(p, { resourceId, traceId });
    expect(after.decision).toBe('allow');
    for (const key of [`resource:${resourceId}@24h`, `resource:${resourceId}@7d`, `run:${traceId}`]) {
      expect(after.usage[key]).toMatchObject({
        inputTokens: 1000,
        outputTokens: 200,
        estimatedCost: STEP_MICROS / 1e6,
        costUnit: 'USD',
        unpricedEvents: 0,
        costByUnit: { USD: STEP_MICROS / 1e6 },
      });
    }
    // Its counters are exactly those of the step priced at ingest: the tokens moved from the unpriced row to the USD row.
    expect(await countersOf(p)).toEqual(await countersOf(twin));

    // The metric answers, once the projector ran: the step with its new cost, as if priced at ingest.
    await catchUp();
    const aggregate = await api(p, 'POST', '/api/observability/metrics/aggregate', {
      name: TOTALS,
      aggregation: 'sum',
      filters: { resourceId },
    });
    expect(aggregate.body).toMatchObject({ value: 1200, estimatedCost: STEP_MICROS / 1e6, costUnit: 'USD' });
    const wholeHours = {
      start: new Date(at - 10 * 60_000 - HOUR).toISOString(),
      end: new Date(at - 10 * 60_000 + 2 * HOUR).toISOString(),
    };
    const ranged = await api(p, 'POST', '/api/observability/metrics/aggregate', {
      name: TOTALS,
      aggregation: 'sum',
      filters: { timestamp: wholeHours },
    });
    expect(ranged.body).toMatchObject({ value: 1200, estimatedCost: STEP_MICROS / 1e6, costUnit: 'USD' });
    const byUnit = await api(p, 'POST', '/api/observability/metrics/breakdown', {
      name: TOTALS,
      groupBy: ['costUnit'],
      aggregation: 'sum',
    });
    expect(byUnit.body.groups).toEqual([
      {
        dimensions: { costUnit: 'USD' },
        value: 1200,
        estimatedCost: STEP_MICROS / 1e6,
        costUnit: 'USD',
        unpricedSteps: 0,
        unpricedTokens: 0,
      },
    ]);
    expect(await rollupsOf(p)).toEqual(await rollupsOf(twin));

    // A second identical reprice appends nothing.
    const again = await reprice(p, range);
    expect(again.body).toMatchObject({ scanned: 1, repriced: 0, unchanged: 1, deltaByUnit: {} });
    expect(await logOf(p, 'StepRepriced')).toHaveLength(1);
    expect(await countersOf(p)).toEqual(await countersOf(twin));
  });

  it('a step of the current hour (read from the log itself, not the counters) counts at its new cost in the guard', async () => {
    const p = await createProject(svc.url);
    const resourceId = `r-${randomUUID()}`;
    const now = Date.now();
    const step = stepEvent({ ...UNKNOWN, resourceId, occurredAt: new Date(now - 1000).toISOString(), usage: USAGE });
    await ingest(p, [step]);
    const check = async () =>
      (
        await api(p, 'POST', '/v1/guard/check', {
          context: { resourceId },
          limits: [{ scope: 'resource', window: '1h', maxCost: 1 }],
        })
      ).body.usage[`resource:${resourceId}@1h`];
    expect(await check()).toMatchObject({ estimatedCost: 0, unpricedEvents: 1, totalTokens: 1200 });
    expect((await putPrice(p, { effectiveFrom: new Date(now - HOUR).toISOString(), ...RATES })).status).toBe(200);
    expect(
      (await reprice(p, { from: new Date(now - HOUR).toISOString(), to: new Date(now + 1000).toISOString() })).body,
    ).toMatchObject({ repriced: 1 });
    expect(await check()).toMatchObject({
      estimatedCost: STEP_MICROS / 1e6,
      costUnit: 'USD',
      costByUnit: { USD: STEP_MICROS / 1e6 },
      unpricedEvents: 0,
      totalTokens: 1200,
    });
  });

  it('corrects a correction: the latest cost is the last correction, and only the difference is applied', async () => {
    const p = await createProject(svc.url);
    const resourceId = `r-${randomUUID()}`;
    const step = stepEvent({ ...UNKNOWN, resourceId, occurredAt: new Date(at).toISOString(), usage: USAGE });
    await ingest(p, [step]);
    const effectiveFrom = new Date(at - HOUR).toISOString();
    await putPrice(p, { effectiveFrom, ...RATES });
    expect((await reprice(p, range)).body.repriced).toBe(1);
    // The same override, rates raised: 600 × 4 + 400 × 1 = 2800 input, 200 × 16 = 3200 output.
    const raised = await putPrice(p, {
      effectiveFrom,
      inputPerMillion: 4,
      outputPerMillion: 16,
      cacheReadPerMillion: 1,
    });
    expect(raised.body.warnings).toEqual([
      expect.objectContaining({ code: 'stored_steps_priced_otherwise', steps: 1 }),
    ]);
    const second = await reprice(p, range);
    expect(second.body).toMatchObject({
      repriced: 1,
      newlyPriced: 0,
      deltaByUnit: { USD: { costMicros: 6000 - STEP_MICROS } },
    });
    const corrections = await logOf(p, 'StepRepriced');
    expect(corrections.map((c) => [c.event_id, Number(c.cost_micros), c.data.old.costMicros])).toEqual([
      [`tg:reprice:${step.eventId}:1`, STEP_MICROS, null],
      [`tg:reprice:${step.eventId}:2`, 6000, STEP_MICROS],
    ]);
    expect(
      (await guardUsage(p, { resourceId, traceId: step.traceId })).usage[`resource:${resourceId}@24h`],
    ).toMatchObject({ estimatedCost: 0.006, unpricedEvents: 0 });
    expect((await reprice(p, range)).body.repriced).toBe(0);
  });

  it('reprices a step with 1-hour cache writes as ingest priced it: the stored split, each write at its own rate', async () => {
    const model = { provider: 'anthropic', model: 'claude-sonnet-4-20250514' };
    // 100 uncached, 600 5-minute and 400 1-hour cache writes, 200 output.
    const providerUsage = {
      format: 'anthropic',
      usage: {
        input_tokens: 100,
        cache_creation_input_tokens: 1000,
        cache_creation: { ephemeral_5m_input_tokens: 600, ephemeral_1h_input_tokens: 400 },
        output_tokens: 200,
      },
    };
    const step = () => {
      const { usage: _usage, ...rest } = stepEvent({
        ...model,
        resourceId: `r-${randomUUID()}`,
        occurredAt: new Date(at).toISOString(),
      });
      return { ...rest, providerUsage };
    };
    const p = await createProject(svc.url);
    const first = step();
    await ingest(p, [first]);
    // The catalog: 100 × 3 + 600 × 3.75 + 400 × 6 + 200 × 15 = 300 + 2,250 + 2,400 + 3,000.
    const [stored] = await logOf(p, 'StepUsageRecorded');
    expect(stored).toMatchObject({
      cache_write_tokens: 1000n,
      cache_write_1h_tokens: 400n,
      cost_micros: 7950n,
      input_cost_micros: 4950n,
      cost_source: 'catalog',
    });
    expect((await api(p, 'GET', '/v1/steps')).body.steps).toEqual([
      expect.objectContaining({
        usage: {
          inputTokens: 1100,
          cacheReadTokens: 0,
          cacheWriteTokens: 1000,
          cacheWrite1hTokens: 400,
          outputTokens: 200,
          reasoningTokens: 0,
          totalTokens: 1300,
        },
        cost: 0.00795,
      }),
    ]);
    // Repriced at the same catalog price, from the stored usage: the same cost, nothing appended.
    expect((await reprice(p, range)).body).toMatchObject({ scanned: 1, repriced: 0, unchanged: 1, deltaByUnit: {} });

    // An override with its own 1-hour rate, $7.50: 300 + 2,250 + 3,000 + 3,000 = 8,550.
    const rates = {
      effectiveFrom: new Date(at - HOUR).toISOString(),
      inputPerMillion: 3,
      outputPerMillion: 15,
      cacheWritePerMillion: 3.75,
      cacheWrite1hPerMillion: 7.5,
    };
    const put = await putPrice(p, rates, model.provider, model.model);
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({
      cacheWritePerMillion: 3.75,
      cacheWrite1hPerMillion: 7.5,
      warnings: [expect.objectContaining({ steps: 1 })],
    });
    expect((await reprice(p, range)).body).toMatchObject({
      repriced: 1,
      deltaByUnit: { USD: { costMicros: 8550 - 7950 } },
    });
    const [correction] = await logOf(p, 'StepRepriced');
    expect(correction).toMatchObject({
      cache_write_tokens: 1000n,
      cache_write_1h_tokens: 400n,
      cost_micros: 8550n,
      input_cost_micros: 5550n,
      output_cost_micros: 3000n,
      cost_source: 'override',
    });
    // The same step ingested under that override costs the same.
    const twin = await createProject(svc.url);
    expect((await putPrice(twin, rates, model.provider, model.model)).status).toBe(200);
    await ingest(twin, [step()]);
    expect((await logOf(twin, 'StepUsageRecorded'))[0]).toMatchObject({
      cache_write_1h_tokens: 400n,
      cost_micros: 8550n,
      input_cost_micros: 5550n,
      cost_source: 'override',
    });

    // A bad 1-hour rate is refused by name, and changes nothing.
    const bad = await putPrice(p, { ...rates, cacheWrite1hPerMillion: -1 }, model.provider, model.model);
    expect([bad.status, bad.body.field]).toEqual([400, 'cacheWrite1hPerMillion']);
    expect((await api(p, 'GET', '/v1/prices')).body.prices).toEqual([
      expect.objectContaining({ cacheWrite1hPerMillion: 7.5 }),
    ]);
  });

  it('metric answers see a correction before the projector does: in the unprojected tail and at sub-minute edges read from the log', async () => {
    const resourceId = `r-${randomUUID()}`;
    const aggregate = (p: TestProject, timestamp?: { start: string; end: string }) =>
      api(p, 'POST', '/api/observability/metrics/aggregate', {
        name: TOTALS,
        aggregation: 'sum',
        filters: { resourceId, ...(timestamp ? { timestamp } : {}) },
      });
    const breakdown = (p: TestProject) =>
      api(p, 'POST', '/api/observability/metrics/breakdown', {
        name: TOTALS,
        groupBy: ['costUnit'],
        aggregation: 'sum',
        filters: { resourceId },
      });
    const counted = (p: TestProject) =>
      api(p, 'POST', '/api/observability/metrics/aggregate', {
        name: TOTALS,
        aggregation: 'count',
        filters: { resourceId },
      });
    // Seconds around the step: both edges inside one minute, so the whole range is read from the log.
    const edges = { start: new Date(at - 5000).toISOString(), end: new Date(at + 5000).toISOString() };
    const priced = { value: 1200, estimatedCost: 0.006, costUnit: 'USD' };
    const expectRepriced = async (p: TestProject) => {
      expect((await aggregate(p)).body).toMatchObject(priced);
      expect((await aggregate(p, edges)).body).toMatchObject(priced);
      expect((await counted(p)).body).toMatchObject({ value: 2 });
      expect((await breakdown(p)).body.groups).toEqual([
        {
          dimensions: { costUnit: 'USD' },
          value: 1200,
          estimatedCost: 0.006,
          costUnit: 'USD',
          unpricedSteps: 0,
          unpricedTokens: 0,
        },
      ]);
    };
    const priceTwice = async (p: TestProject) => {
      const effectiveFrom = new Date(at - HOUR).toISOString();
      await putPrice(p, { effectiveFrom, ...RATES });
      expect((await reprice(p, range)).body.repriced).toBe(1);
      // A correction of the correction: 2800 input + 3200 output.
      await putPrice(p, { effectiveFrom, inputPerMillion: 4, outputPerMillion: 16, cacheReadPerMillion: 1 });
      expect((await reprice(p, range)).body.repriced).toBe(1);
    };

    // The step was projected unpriced; its corrections are in the tail.
    const projected = await createProject(svc.url);
    await ingest(projected, [
      stepEvent({ ...UNKNOWN, resourceId, occurredAt: new Date(at).toISOString(), usage: USAGE }),
    ]);
    await catchUp();
    expect((await breakdown(projected)).body.groups).toEqual([
      {
        dimensions: { costUnit: null },
        value: 1200,
        estimatedCost: null,
        costUnit: null,
        unpricedSteps: 1,
        unpricedTokens: 1200,
      },
    ]);
    await priceTwice(projected);
    await expectRepriced(projected);

    // The step and its corrections all in the tail.
    const unprojected = await createProject(svc.url);
    await ingest(unprojected, [
      stepEvent({ ...UNKNOWN, resourceId, occurredAt: new Date(at).toISOString(), usage: USAGE }),
    ]);
    await priceTwice(unprojected);
    await expectRepriced(unprojected);

    // And the same once the projector has run.
    await catchUp();
    await expectRepriced(projected);
    await expectRepriced(unprojected);
  });

  it('never reprices a provider-reported cost, and keeps to the provider and model asked for', async () => {
    const p = await createProject(svc.url);
    const resourceId = `r-${randomUUID()}`;
    const reported = stepEvent({
      ...UNKNOWN,
      resourceId,
      occurredAt: new Date(at).toISOString(),
      usage: USAGE,
      cost: { amount: 0.5, currency: 'USD' },
    });
    const unpriced = stepEvent({ ...UNKNOWN, resourceId, occurredAt: new Date(at + 1000).toISOString(), usage: USAGE });
    const other = stepEvent({
      provider: 'acme',
      model: 'acme-small',
      resourceId,
      occurredAt: new Date(at + 2000).toISOString(),
      usage: USAGE,
    });
    await ingest(p, [reported, unpriced, other]);
    await putPrice(p, { effectiveFrom: new Date(at - HOUR).toISOString(), ...RATES });
    await putPrice(p, { effectiveFrom: new Date(at - HOUR).toISOString(), ...RATES }, 'acme', 'acme-small');
    const res = await reprice(p, { ...range, provider: 'acme', model: 'acme-large' });
    expect(res.body).toMatchObject({
      provider: 'acme',
      model: 'acme-large',
      scanned: 2,
      repriced: 1,
      providerReported: 1,
      deltaByUnit: { USD: { costMicros: STEP_MICROS } },
    });
    expect((await logOf(p, 'StepRepriced')).map((c) => c.data.stepEventId)).toEqual([unpriced.eventId]);
    // The reported cost stands; the other model is repriced only when asked for.
    const usage = (await guardUsage(p, { resourceId, traceId: unpriced.traceId })).usage[`resource:${resourceId}@24h`];
    expect(usage).toMatchObject({ estimatedCost: 0.503, unpricedEvents: 1 });
    expect((await reprice(p, { ...range, provider: 'acme' })).body).toMatchObject({
      scanned: 3,
      repriced: 1,
      providerReported: 1,
      unchanged: 1,
    });
  });

  it('lets two reprices run at once without applying any step twice', async () => {
    const p = await createProject(svc.url);
    const resourceId = `r-${randomUUID()}`;
    const steps = Array.from({ length: 40 }, (_, i) =>
      stepEvent({ ...UNKNOWN, resourceId, occurredAt: new Date(at + i * 1000).toISOString(), usage: USAGE }),
    );
    await ingest(p, steps);
    await putPrice(p, { effectiveFrom: new Date(at - HOUR).toISOString(), ...RATES });
    const [a, b] = await Promise.all([reprice(p, range), reprice(p, range)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.body.repriced + b.body.repriced).toBe(40);
    expect(await logOf(p, 'StepRepriced')).toHaveLength(40);
    expect(
      (await guardUsage(p, { resourceId, traceId: steps[0].traceId })).usage[`resource:${resourceId}@24h`],
    ).toMatchObject({ estimatedCost: (40 * STEP_MICROS) / 1e6, unpricedEvents: 0, totalTokens: 40 * 1200 });
  });

  it('refuses an unbounded or reversed range, a model without its provider, and a key without the admin scope', async () => {
    const p = await createProject(svc.url);
    const bad = async (body: Record<string, unknown>, field: string) => {
      const res = await reprice(p, body);
      expect([res.status, res.body.field]).toEqual([400, field]);
    };
    await bad({ to: range.to }, 'from');
    await bad({ from: range.from }, 'to');
    await bad({ from: range.to, to: range.from }, 'to');
    await bad({ ...range, model: 'acme-large' }, 'provider');
    await bad({ ...range, dryRun: 'yes' }, 'dryRun');
    await bad({ ...range, from: '0000-01-01T00:00:00Z' }, 'from');
    await bad({ ...range, to: '2026-13-01T00:00:00Z' }, 'to');
    await bad({ ...range, provider: 'a\u0000b' }, 'provider');
    await bad({ ...range, provider: 'acme', model: 'x'.repeat(300) }, 'model');
    await bad({ ...range, batchSize: 10 }, 'batchSize');
    const notObject = await call(svc.url, 'POST', '/v1/prices/reprice', { token: p.key, raw: '[]' });
    expect(notObject.status).toBe(400);
    const reader = await createProject(svc.url, ['read', 'ingest']);
    expect((await reprice(reader, range)).status).toBe(403);
  });

  describe('npm run tollgate -- prices reprice', () => {
    const command = COMMANDS.find((c) => c.name === 'prices reprice')!;
    const run = async (values: Record<string, unknown>, stderr: { isTTY: boolean; write: (s: string) => boolean }) => {
      const out: string[] = [];
      const spy = jest.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
      try {
        await command.run(svc.app, values, [], stderr as unknown as NodeJS.WriteStream);
      } finally {
        spy.mockRestore();
      }
      return out.join('');
    };

    it('prints one summary line when not on a terminal, and a progress bar on one', async () => {
      const p = await createProject(svc.url);
      await ingest(p, [
        stepEvent({ ...UNKNOWN, occurredAt: new Date(at).toISOString(), usage: USAGE }),
        stepEvent({ ...UNKNOWN, occurredAt: new Date(at + 1).toISOString(), usage: USAGE }),
      ]);
      await putPrice(p, { effectiveFrom: new Date(at - HOUR).toISOString(), ...RATES });
      const piped: string[] = [];
      const args = { project: p.id, from: range.from, to: range.to, provider: 'acme', model: 'acme-large' };
      expect(await run({ ...args, 'dry-run': true }, { isTTY: false, write: (s) => (piped.push(s), true) })).toBe(
        `dry run: would reprice 2 of 2 steps (0 unchanged, 0 provider-reported, 2 newly priced) in 1 batches; delta +${2 * STEP_MICROS} micro-USD\n`,
      );
      expect(piped).toEqual([]);
      expect(await logOf(p, 'StepRepriced')).toEqual([]);

      const tty: string[] = [];
      expect(await run(args, { isTTY: true, write: (s) => (tty.push(s), true) })).toBe(
        `repriced 2 of 2 steps (0 unchanged, 0 provider-reported, 2 newly priced) in 1 batches; delta +${2 * STEP_MICROS} micro-USD\n`,
      );
      expect(tty.at(-1)).toMatch(/^\rprices reprice \[#{30}\] 2\/2 events .* done in /);
      expect(await logOf(p, 'StepRepriced')).toHaveLength(2);
    });

    it('refuses what the API refuses, naming the option', async () => {
      const quiet = { isTTY: false, write: () => true };
      await expect(run({ project: 'p', from: range.to, to: range.from }, quiet)).rejects.toThrow(
        '--to must be after from',
      );
      await expect(run({ project: 'p', to: range.to }, quiet)).rejects.toThrow('--from is required');
      await expect(run({ from: range.from, to: range.to }, quiet)).rejects.toThrow('--project is required');
      await expect(run({ project: 'no-such-project', ...range }, quiet)).rejects.toThrow('No project no-such-project');
    });
  });

  describe('setting an override', () => {
    it("defaults the first override of a model to the project's earliest unpriced step of it, so the reprice it names prices what was just sent", async () => {
      const p = await createProject(svc.url);
      const first = stepEvent({
        ...UNKNOWN,
        occurredAt: new Date(Date.now() - 10 * 60_000).toISOString(),
        usage: USAGE,
      });
      const justSent = stepEvent({ ...UNKNOWN, occurredAt: new Date(Date.now() - 1000).toISOString(), usage: USAGE });
      await ingest(p, [first, justSent]);
      const put = await putPrice(p, RATES);
      expect(put.status).toBe(200);
      expect(put.body).toMatchObject({
        effectiveFrom: first.occurredAt,
        effectiveFromDefault: 'earliest_unpriced_step',
      });
      const [warning] = put.body.warnings;
      expect(warning).toMatchObject({ steps: 2 });
      const res = await reprice(p, warning.reprice.body);
      expect(res.body).toMatchObject({ repriced: 2, deltaByUnit: { USD: { costMicros: 2 * STEP_MICROS } } });

      // Once the model has an override, a price without effectiveFrom is a change from now on.
      const before = Date.now();
      const later = await putPrice(p, { inputPerMillion: 3, outputPerMillion: 9 });
      expect(later.body.effectiveFromDefault).toBe('now');
      expect(Date.parse(later.body.effectiveFrom)).toBeGreaterThanOrEqual(before);
      expect(later.body.warnings).toEqual([]);
    });

    it('defaults to now for a model the catalog prices, and warns of the stored steps a backdated override would price otherwise', async () => {
      const p = await createProject(svc.url);
      const steps = [
        stepEvent({ occurredAt: new Date(at).toISOString() }),
        stepEvent({ occurredAt: new Date(at + 5000).toISOString() }),
      ];
      await ingest(p, steps);
      const now = await putPrice(p, { inputPerMillion: 1, outputPerMillion: 1 }, 'openai', 'gpt-4o');
      expect(now.body).toMatchObject({ effectiveFromDefault: 'now', warnings: [] });
      const backdated = await putPrice(
        p,
        { effectiveFrom: new Date(at - HOUR).toISOString(), inputPerMillion: 1, outputPerMillion: 1 },
        'openai',
        'gpt-4o',
      );
      expect(backdated.body.warnings).toEqual([
        expect.objectContaining({
          steps: 2,
          reprice: expect.objectContaining({
            body: {
              from: new Date(at - HOUR).toISOString(),
              to: new Date(at + 5001).toISOString(),
              provider: 'openai',
              model: 'gpt-4o',
            },
          }),
        }),
      ]);
      expect(backdated.body.effectiveFromDefault).toBeUndefined();
      // 1000 in + 200 out at 1 / M each = 1200 micros, was 4500 (catalog).
      const res = await reprice(p, backdated.body.warnings[0].reprice.body);
      expect(res.body).toMatchObject({
        repriced: 2,
        newlyPriced: 0,
        deltaByUnit: { USD: { costMicros: 2 * (1200 - 4500) } },
      });
    });
  });
});
