import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import type { EventBus } from '@nestjs/cqrs';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { insertStepEvents } from '../append-events/insert-step-events.sql';
import { normalizeModel, normalizeProvider, type PricedCost } from '../pricing/price-step';
import { appendRepricedSteps, type CorrectionRow } from './append-repriced-steps.sql';
import { stepCostOf } from './reprice-decision';
import { Repricer } from './repricer';
import { normalizedModelSql, normalizedProviderSql, readRepriceBatch } from './step-costs.sql';

describe('repricing stored steps (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 4);
  const published: unknown[] = [];
  const repricer = new Repricer(prisma, { publish: (e: unknown) => published.push(e) } as unknown as EventBus);
  const at = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 5 * 3_600_000 + 123_456);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const project = async () => {
    const id = `p-${randomUUID()}`;
    await prisma.sql.query(`INSERT INTO projects (id, name) VALUES ($1, 'reprice spec')`, id);
    return id;
  };
  const setPrice = (
    projectId: string,
    rates: { input: number; output: number; currency?: string },
    model = 'acme-large',
  ) =>
    prisma.sql.query(
      `INSERT INTO price_overrides (id, project_id, provider, model, effective_from, currency, input_per_million, output_per_million) VALUES ($1, $2, 'acme', $3, $4, $5, $6, $7)`,
      `prc_${randomUUID().slice(0, 8)}`,
      projectId,
      model,
      new Date(at.getTime() - 3_600_000),
      rates.currency ?? 'USD',
      rates.input,
      rates.output,
    );
  const step = (over: Partial<StepUsageEvent> = {}): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: at.toISOString(),
    traceId: 'trace-1',
    runId: 'run-1',
    threadId: 'thread-1',
    resourceId: 'resource-1',
    userId: 'user-1',
    organizationId: 'org-1',
    sessionId: 'session-1',
    entityType: 'agent',
    provider: 'acme',
    model: 'acme-large',
    usage: { inputTokens: 1000, outputTokens: 200 },
    ...over,
  });
  const ingest = async (projectId: string, e: StepUsageEvent, cost: PricedCost) =>
    (await insertStepEvents(prisma.sql, projectId, [{ event: e, occurredAt: new Date(e.occurredAt), cost }])).get(
      e.eventId,
    )!.position;
  const countersOf = (projectId: string) =>
    prisma.sql.query(
      `SELECT scope, scope_id, granularity::text, bucket_start, cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events, events
         FROM usage_counters WHERE project_id = $1 AND (input_tokens, output_tokens, cost_micros, unpriced_events, events) <> (0, 0, 0, 0, 0)
        ORDER BY scope, scope_id, granularity, bucket_start, cost_unit`,
      projectId,
    );
  const corrections = (projectId: string) =>
    prisma.sql.query<{ event_id: string }>(
      `SELECT event_id FROM events WHERE project_id = $1 AND type = 'StepRepriced' ORDER BY event_id`,
      projectId,
    );

  const UNPRICED: PricedCost = { priced: false };
  const usd = (micros: number): PricedCost => ({
    priced: true,
    costMicros: BigInt(micros),
    inputCostMicros: BigInt(micros - 1000),
    outputCostMicros: 1000n,
    currency: 'USD',
    source: 'override',
    priceId: 'override:a',
  });
  const eur = (micros: number): PricedCost =>
    ({ ...usd(micros), currency: 'EUR', priceId: 'override:b' }) as PricedCost;

  it('finds steps by provider and model as the pricing does (the SQL normalizers agree with normalizeProvider / normalizeModel)', async () => {
    const pairs = [
      ['openai', 'gpt-4o'],
      ['OpenAI.responses', 'openai/gpt-4o'],
      ['openai:chat', 'OPENAI/gpt-4o'],
      ['google-vertex', 'google/gemini-2'],
      ['vertex.ai', 'gemini-2'],
      ['anthropic/messages', 'Claude-3'],
      ['acme', 'acme/x/y'],
    ];
    const rows = await prisma.sql.query<{ p: string; m: string }>(
      `SELECT ${normalizedProviderSql('x.p')} AS p, ${normalizedModelSql('x.p', 'x.m')} AS m FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(p, m, i) ORDER BY i`,
      pairs.map(([p]) => p),
      pairs.map(([, m]) => m),
    );
    expect(rows.map((r) => [r.p, r.m])).toEqual(pairs.map(([p, m]) => [normalizeProvider(p), normalizeModel(p, m)]));
  });

  it.each([
    ['unpriced → USD', UNPRICED, usd(3600)],
    ['USD → more USD', usd(3600), usd(5000)],
    ['USD → EUR', usd(3600), eur(3000)],
    ['USD → unpriced', usd(3600), UNPRICED],
  ])(
    'applies a correction to the counters of every scope exactly as ingest at the new price would have (%s)',
    async (_what, before, after) => {
      const corrected = await project();
      const twin = await project();
      const e = step();
      const position = await ingest(corrected, e, before);
      await ingest(twin, e, after);
      const correction: CorrectionRow = {
        eventId: `tg:reprice:${e.eventId}:1`,
        stepEventId: e.eventId,
        stepPosition: position,
        occurredAt: at,
        sequence: 1,
        old: stepCostOf(before),
        new: stepCostOf(after),
      };
      expect([...(await appendRepricedSteps(prisma.sql, corrected, [correction])).keys()]).toEqual([
        correction.eventId,
      ]);
      const expected = await countersOf(twin);
      expect(expected.map((r: any) => `${r.scope}:${r.granularity}`).sort()).toEqual([
        'organization:d',
        'organization:h',
        'resource:d',
        'resource:h',
        'run:r',
        'run:r',
        'session:d',
        'session:h',
        'thread:d',
        'thread:h',
        'user:d',
        'user:h',
      ]);
      expect(await countersOf(corrected)).toEqual(expected);
      // The same correction again (a concurrent reprice that read the same latest cost): its id is taken, nothing is applied.
      expect((await appendRepricedSteps(prisma.sql, corrected, [correction])).size).toBe(0);
      expect(await countersOf(corrected)).toEqual(expected);
      // The latest cost is now the correction's.
      const [read] = await readRepriceBatch(
        prisma.sql,
        corrected,
        { from: at, to: new Date(at.getTime() + 1) },
        null,
        10,
      );
      expect(read).toMatchObject({
        eventId: e.eventId,
        sequence: 1,
        latest: { costMicros: after.priced ? Number(after.costMicros) : null, unpriced: !after.priced },
      });
    },
  );

  it('reads a range in batches by (occurredAt, position), steps of the same instant included, once each', async () => {
    const p = await project();
    await setPrice(p, { input: 2, output: 8 });
    const same = [step(), step(), step()];
    for (const e of [
      ...same,
      step({ occurredAt: new Date(at.getTime() + 1).toISOString() }),
      step({ occurredAt: new Date(at.getTime() + 2).toISOString() }),
    ])
      await ingest(p, e, UNPRICED);
    const seen: number[] = [];
    const range = { from: at, to: new Date(at.getTime() + 1000) };
    const summary = await repricer.reprice(p, range, { batchSize: 2, onBatch: (s) => seen.push(s.scanned) });
    expect(summary).toMatchObject({
      scanned: 5,
      repriced: 5,
      newlyPriced: 5,
      batches: 3,
      deltaByUnit: { USD: { costMicros: 5 * 3600 } },
    });
    expect(seen).toEqual([2, 4, 5]);
    expect(await corrections(p)).toHaveLength(5);
    expect(await repricer.countSteps(p, range)).toBe(5);
    expect(await repricer.reprice(p, range, { batchSize: 2 })).toMatchObject({ scanned: 5, repriced: 0, unchanged: 5 });
    expect(await corrections(p)).toHaveLength(5);
  });

  it('takes turns batch by batch when two reprices run at once: each step is corrected once', async () => {
    const p = await project();
    await setPrice(p, { input: 2, output: 8 });
    for (let i = 0; i < 12; i++)
      await ingest(p, step({ occurredAt: new Date(at.getTime() + i).toISOString(), resourceId: 'r-race' }), UNPRICED);
    const range = { from: at, to: new Date(at.getTime() + 1000) };
    const runs = await Promise.all([
      repricer.reprice(p, range, { batchSize: 1 }),
      repricer.reprice(p, range, { batchSize: 1 }),
      repricer.reprice(p, range, { batchSize: 5 }),
    ]);
    expect(runs.reduce((n, r) => n + r.repriced, 0)).toBe(12);
    expect((await corrections(p)).map((c) => c.event_id.endsWith(':1'))).toEqual(Array(12).fill(true));
    const [row] = await prisma.sql.query<{ cost: string; unpriced: string }>(
      `SELECT sum(cost_micros) AS cost, sum(unpriced_events) AS unpriced FROM usage_counters WHERE project_id = $1 AND scope = 'resource' AND scope_id = 'r-race' AND granularity = 'h'`,
      p,
    );
    expect(row).toEqual({ cost: String(12 * 3600), unpriced: '0' });
  });

  it('appends nothing and applies nothing in a dry run', async () => {
    const p = await project();
    await setPrice(p, { input: 2, output: 8 });
    await ingest(p, step({ resourceId: 'r-dry' }), UNPRICED);
    const before = await countersOf(p);
    published.length = 0;
    expect(await repricer.reprice(p, { from: at, to: new Date(at.getTime() + 1), dryRun: true })).toMatchObject({
      dryRun: true,
      repriced: 1,
      deltaByUnit: { USD: { costMicros: 3600 } },
    });
    expect(await corrections(p)).toEqual([]);
    expect(await countersOf(p)).toEqual(before);
    expect(published).toEqual([]);
  });
});
