import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { insertStepEvents } from '../../../ledger/src/append-events/insert-step-events.sql';
import { priceStep } from '../../../ledger/src/pricing/price-step';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { MetricsProjector } from '../projection/metrics-projector';
import { buildQuery, rollupLevels } from './metric-query';
import { aggregateRecords, percentilesOf } from './metric-query.sql';

const HOUR = 3_600_000;

/**
 * The metric statements against real PostgreSQL, asserted through their answers (the statement
 * text is being reworked): the same exact numbers whether they come from the log's unprojected
 * tail or from the rollups once the projector has read the steps.
 */
describe('metric query statements (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 3);
  afterAll(() => prisma.onModuleDestroy());

  /**
   * Runs the projector until it has read this project's steps. It reads below the oldest running
   * transaction of the whole PostgreSQL cluster, so another database's open transaction (other test
   * runs on the same server) can hold it back for a moment.
   */
  const projectAll = async (lag: () => Promise<number>) => {
    const projector = new MetricsProjector(prisma);
    for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      await projector.catchUp();
      if ((await lag()) === 0) return;
    }
    throw new Error('the projector did not reach the steps in 20 s');
  };
  const hour = Math.floor(Date.now() / HOUR) * HOUR - 3 * HOUR;
  const range = { start: new Date(hour - HOUR), end: new Date(hour + 2 * HOUR) };

  const step = (
    at: number,
    inputTokens: number,
    outputTokens: number,
    over: Partial<StepUsageEvent> = {},
  ): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: new Date(at).toISOString(),
    traceId: 'trace-1',
    resourceId: 'r1',
    entityType: 'agent',
    provider: 'openai',
    model: 'gpt-4o', // input $2.50/M, output $10/M
    usage: { inputTokens, outputTokens },
    ...over,
  });
  const seed = async () => {
    const project = `p-${randomUUID()}`;
    const events = [
      step(hour + 60_000, 1000, 100, { durationMs: 100 }),
      step(hour + 120_000, 3000, 300, { durationMs: 300, userId: 'u1' }),
      step(hour + HOUR + 5_000, 2000, 200, { durationMs: 200 }),
      step(hour + HOUR + 6_000, 500, 50, { provider: 'acme', model: 'no-such-model', durationMs: 400 }),
      step(hour - 2 * HOUR, 9999, 9999), // before the range
    ];
    await new EventPartitions(prisma).ensureFor(events.map((e) => new Date(e.occurredAt)));
    await insertStepEvents(
      prisma.sql,
      project,
      events.map((e) => ({
        event: e,
        occurredAt: new Date(e.occurredAt),
        cost: priceStep(e, new Date(e.occurredAt), []),
      })),
    );
    return project;
  };
  const aggregate = (
    project: string,
    names: string[],
    shape: Parameters<typeof buildQuery>[3] = {},
    filters: Record<string, string> = {},
  ) => {
    const q = buildQuery(project, names, { timestamp: range, ...filters }, shape);
    return aggregateRecords(prisma, q, rollupLevels(q));
  };

  it('sums tokens and their cost per group, unpriced steps and tokens apart; the same from the log tail and from the rollups', async () => {
    const p = await seed();
    const ask = () => aggregate(p, ['mastra_model_total_input_tokens'], { groups: ['provider'] });
    const expected = [
      {
        groups: ['acme'],
        count: 1,
        sum: 500,
        min: 500,
        max: 500,
        costMicros: null,
        costUnits: [],
        unpricedSteps: 1,
        unpricedTokens: 500,
      },
      // 6000 input tokens × $2.50/M = 15000 micro-dollars
      {
        groups: ['openai'],
        count: 3,
        sum: 6000,
        min: 1000,
        max: 3000,
        costMicros: 15_000,
        costUnits: ['USD'],
        unpricedSteps: 0,
        unpricedTokens: 0,
      },
    ];
    const sorted = (rows: { groups: (string | null)[] }[]) =>
      [...rows].sort((a, b) => String(a.groups[0]).localeCompare(String(b.groups[0])));
    const fromTail = await ask();
    expect(sorted(fromTail.rows)).toEqual(expected.map((r) => expect.objectContaining(r)));
    expect(fromTail.lag.events).toBeGreaterThanOrEqual(5);
    await projectAll(async () => (await ask()).lag.events);
    const fromRollups = await ask();
    expect(sorted(fromRollups.rows)).toEqual(expected.map((r) => expect.objectContaining(r)));
    expect(fromRollups.lag.events).toBe(0);
  });

  it('filters by a scope id and answers series per hour bucket', async () => {
    const p = await seed();
    const byUser = await aggregate(p, ['mastra_model_total_output_tokens'], {}, { userId: 'u1' });
    expect(byUser.rows).toEqual([
      expect.objectContaining({ count: 1, sum: 300, costMicros: 3000, costUnits: ['USD'] }),
    ]);
    const series = await aggregate(p, ['mastra_model_total_output_tokens'], { bucketMs: HOUR });
    expect(series.rows.map((r) => [r.ts, r.sum, r.costMicros])).toEqual([
      [hour, 400, 4000],
      [hour + HOUR, 250, 2000],
    ]);
  });

  it('matches nothing for a filter no step can meet, and nothing in another project', async () => {
    const p = await seed();
    const q = buildQuery(p, ['mastra_model_total_input_tokens'], { timestamp: range, requestId: 'r' }, {});
    expect((await aggregateRecords(prisma, q, rollupLevels(q))).rows).toEqual([
      expect.objectContaining({ count: 0, sum: null }),
    ]);
    expect((await aggregate(`p-${randomUUID()}`, ['mastra_model_total_input_tokens'])).rows).toEqual([
      expect.objectContaining({ count: 0 }),
    ]);
  });

  it('answers percentiles per bucket from the log', async () => {
    const p = await seed();
    const q = buildQuery(p, ['mastra_model_duration_ms'], { timestamp: range }, { bucketMs: HOUR });
    const { rows } = await percentilesOf(prisma, q, [0.5, 0.99]);
    expect(rows).toEqual([
      { ts: hour, values: [300, 300] },
      { ts: hour + HOUR, values: [400, 400] },
    ]);
  });
});
