import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { insertStepEvents } from '../append-events/insert-step-events.sql';
import { emptyUsage, type UsageTotals } from '../budgets/guard-decision';
import type { PricedCost } from '../pricing/price-step';
import { readCounterBounds } from './counter-bounds.sql';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

/**
 * The bounds an alert decision reads from the counters alone: `lower` holds what is surely in the
 * window, `upper` adds the hour the window starts inside of. Written against the answers only.
 */
describe('readCounterBounds (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  afterAll(() => prisma.onModuleDestroy());
  // Half past an hour: a 24h window starts at half past an hour too, inside its edge hour.
  const now = new Date(Math.floor(Date.now() / HOUR) * HOUR - HOUR + 30 * MIN);
  const ago = (ms: number) => new Date(now.getTime() - ms);

  const usd = (micros: number, currency = 'USD'): PricedCost => ({
    priced: true,
    costMicros: BigInt(micros),
    inputCostMicros: BigInt(micros),
    outputCostMicros: 0n,
    currency,
    source: 'override',
    priceId: 'override:a',
  });
  const insert = async (project: string, steps: [Date, number, PricedCost, Partial<StepUsageEvent>?][]) => {
    await new EventPartitions(prisma).ensureFor(steps.map(([at]) => at));
    await insertStepEvents(
      prisma.sql,
      project,
      steps.map(([at, tokens, cost, over]) => ({
        event: {
          eventId: `e-${randomUUID()}`,
          occurredAt: at.toISOString(),
          traceId: 'trace-1',
          resourceId: 'r1',
          entityType: 'agent',
          provider: 'acme',
          model: 'acme-large',
          usage: { inputTokens: tokens, outputTokens: 2 * tokens },
          ...over,
        },
        occurredAt: at,
        cost,
      })),
    );
  };
  const totals = (tokens: number, costByUnit: Record<string, number>): UsageTotals => ({
    ...emptyUsage(),
    inputTokens: tokens,
    outputTokens: 2 * tokens,
    costByUnit,
  });

  it('bounds a rolling window by its whole hours and days, the current hour, and the hour it starts in', async () => {
    const project = `p-${randomUUID()}`;
    const start24 = ago(DAY);
    await insert(project, [
      [ago(10 * MIN), 1, usd(3)], // the current hour
      [new Date(now.getTime() + 5 * MIN), 2, usd(6)], // ahead of now, in the current hour: counts
      [ago(5 * HOUR), 10, usd(70, 'EUR')], // a whole hour of the 24h window
      [new Date(start24.getTime() - 10 * MIN), 100, usd(300)], // before the 24h window, in its edge hour
      [new Date(start24.getTime() + 10 * MIN), 1000, { priced: false }], // in the 24h window, in its edge hour
      [new Date(start24.getTime() - 40 * MIN), 10_000, usd(30_000)], // the hour before: outside the 24h window
      [ago(3 * DAY), 100_000, usd(300_000)], // a whole day of the 7d window
      [ago(8 * DAY), 1_000_000, usd(3_000_000)], // outside the 7d window, in no edge
      [ago(10 * MIN), 7, usd(21), { resourceId: 'r2', traceId: 'trace-2' }], // another resource and run
    ]);
    await insert(`p-${randomUUID()}`, [[ago(10 * MIN), 5, usd(15)]]);
    const bounds = await readCounterBounds(
      prisma.sql,
      project,
      [
        { scope: 'resource', scopeId: 'r1', window: '24h' },
        { scope: 'resource', scopeId: 'r1', window: '7d' },
        { scope: 'run', scopeId: 'trace-1', window: null },
        { scope: 'resource', scopeId: 'r2', window: '1h' },
        { scope: 'user', scopeId: 'nobody', window: '24h' },
      ],
      now,
    );
    expect(bounds.lower).toEqual(
      new Map([
        ['resource:r1@24h', totals(13, { USD: 9, EUR: 70 })],
        ['resource:r1@7d', totals(111_113, { USD: 330_309, EUR: 70 })],
        ['run:trace-1', totals(1_111_113, { USD: 3_330_309, EUR: 70 })],
        ['resource:r2@1h', totals(7, { USD: 21 })],
        ['user:nobody@24h', emptyUsage()],
      ]),
    );
    expect(bounds.upper).toEqual(
      new Map([
        // The edge hour: the step just before the window and the one just inside it (unpriced: tokens only).
        ['resource:r1@24h', totals(1113, { USD: 309, EUR: 70 })],
        ['resource:r1@7d', totals(111_113, { USD: 330_309, EUR: 70 })],
        ['run:trace-1', totals(1_111_113, { USD: 3_330_309, EUR: 70 })],
        ['resource:r2@1h', totals(7, { USD: 21 })],
        ['user:nobody@24h', emptyUsage()],
      ]),
    );
  });

  it('answers empty bounds for no request', async () => {
    expect(await readCounterBounds(prisma.sql, `p-${randomUUID()}`, [], now)).toEqual({
      lower: new Map(),
      upper: new Map(),
    });
  });
});
