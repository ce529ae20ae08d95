import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { insertStepEvents } from '../append-events/insert-step-events.sql';
import type { PricedCost } from '../pricing/price-step';
import type { CorrectionRow } from './append-repriced-steps.sql';
import { stepCostOf } from './reprice-decision';
import { repricedContributions } from './repriced-contributions.sql';

/** What a reprice's corrections add to each scope's usage, for the budget alerts. */
describe('repricedContributions (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  const at = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000 + 61_000);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const step = (over: Partial<StepUsageEvent> = {}): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: at.toISOString(),
    traceId: 'trace-1',
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
  const UNPRICED: PricedCost = { priced: false };
  const cost = (micros: number, currency = 'USD'): PricedCost => ({
    priced: true,
    costMicros: BigInt(micros),
    inputCostMicros: BigInt(micros - 1000),
    outputCostMicros: 1000n,
    currency,
    source: 'override',
    priceId: 'override:a',
  });
  const correction = (e: StepUsageEvent, position: string, old: PricedCost, now: PricedCost): CorrectionRow => ({
    eventId: `tg:reprice:${e.eventId}:1`,
    stepEventId: e.eventId,
    stepPosition: position,
    occurredAt: at,
    sequence: 1,
    old: stepCostOf(old),
    new: stepCostOf(now),
  });

  it('gives each correction the step’s scope keys and the cost it moves, per unit, no tokens', async () => {
    const project = `p-${randomUUID()}`;
    const a = step({
      traceId: 't1',
      runId: 'r1',
      threadId: 'th1',
      resourceId: 'res1',
      userId: 'u1',
      organizationId: 'o1',
      sessionId: 's1',
    });
    const b = step({ traceId: 't2', userId: 'u2' });
    const c = step({ traceId: 't3' });
    const d = step({ traceId: 't4', runId: 't4' }); // the same id twice: one key
    const pa = await ingest(project, a, cost(3600));
    const pb = await ingest(project, b, UNPRICED);
    const pc = await ingest(project, c, cost(3600));
    const pd = await ingest(project, d, cost(3600));
    const corrections = [
      correction(a, pa, cost(3600), cost(5000)),
      correction(b, pb, UNPRICED, cost(2000, 'EUR')),
      correction(c, pc, cost(3600), UNPRICED),
      correction(d, pd, cost(3600), cost(3000, 'EUR')),
    ];
    expect(await repricedContributions(prisma.sql, project, corrections)).toEqual([
      {
        eventId: a.eventId,
        correctionId: corrections[0].eventId,
        occurredAt: at,
        scopeKeys: ['organization:o1', 'resource:res1', 'run:r1', 'run:t1', 'session:s1', 'thread:th1', 'user:u1'],
        inputTokens: 0,
        outputTokens: 0,
        costByUnit: { USD: 1400 },
      },
      {
        eventId: b.eventId,
        correctionId: corrections[1].eventId,
        occurredAt: at,
        scopeKeys: ['run:t2', 'user:u2'],
        inputTokens: 0,
        outputTokens: 0,
        costByUnit: { EUR: 2000 },
      },
      {
        eventId: c.eventId,
        correctionId: corrections[2].eventId,
        occurredAt: at,
        scopeKeys: ['run:t3'],
        inputTokens: 0,
        outputTokens: 0,
        costByUnit: { USD: -3600 },
      },
      {
        eventId: d.eventId,
        correctionId: corrections[3].eventId,
        occurredAt: at,
        scopeKeys: ['run:t4'],
        inputTokens: 0,
        outputTokens: 0,
        costByUnit: { USD: -3600, EUR: 3000 },
      },
    ]);
  });

  it('leaves out a correction whose step is not in the project, and answers nothing for none', async () => {
    const project = `p-${randomUUID()}`;
    const other = `p-${randomUUID()}`;
    const a = step({ userId: 'u1' });
    const b = step({ userId: 'u1' });
    const pa = await ingest(project, a, cost(3600));
    const pb = await ingest(other, b, cost(3600));
    const found = await repricedContributions(prisma.sql, project, [
      correction(a, pa, cost(3600), cost(5000)),
      correction(b, pb, cost(3600), cost(5000)),
    ]);
    expect(found.map((f) => f.eventId)).toEqual([a.eventId]);
    expect(await repricedContributions(prisma.sql, project, [])).toEqual([]);
  });
});
