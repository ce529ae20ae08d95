import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { insertStepEvents } from '../append-events/insert-step-events.sql';
import type { PricedCost } from '../pricing/price-step';
import { appendRepricedSteps } from './append-repriced-steps.sql';
import { stepCostOf } from './reprice-decision';
import { countRangeSteps, earliestUnpricedStep, readRepriceBatch, stepsPricedOtherwise } from './step-costs.sql';

const HOUR = 3_600_000;

/** What a reprice reads of stored steps: their usage and latest cost, a range's count, what an override would change. */
describe('step cost reads (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  const base = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR;
  const at = (minutes: number) => new Date(base + minutes * 60_000);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const step = (minutes: number, over: Partial<StepUsageEvent> = {}): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: at(minutes).toISOString(),
    traceId: 'trace-1',
    userId: 'user-1',
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
  const priced = (
    micros: number,
    priceId: string | null = 'override:a',
    source: 'override' | 'provider' = 'override',
  ): PricedCost => ({
    priced: true,
    costMicros: BigInt(micros),
    inputCostMicros: BigInt(micros - 1000),
    outputCostMicros: 1000n,
    currency: 'USD',
    source,
    priceId,
  });
  const correct = async (
    projectId: string,
    e: StepUsageEvent,
    position: string,
    sequence: number,
    old: PricedCost,
    now: PricedCost,
  ) =>
    appendRepricedSteps(prisma.sql, projectId, [
      {
        eventId: `tg:reprice:${e.eventId}:${sequence}`,
        stepEventId: e.eventId,
        stepPosition: position,
        occurredAt: new Date(e.occurredAt),
        sequence,
        old: stepCostOf(old),
        new: stepCostOf(now),
      },
    ]);
  const range = (from: number, to: number, over: { provider?: string; model?: string } = {}) => ({
    from: at(from),
    to: at(to),
    ...over,
  });

  it('reads a step with its raw usage and its own cost, then its last correction’s', async () => {
    const project = `p-${randomUUID()}`;
    const e = step(10, {
      provider: 'Acme.chat',
      model: 'acme/acme-large',
      usage: {
        inputTokens: 1000,
        outputTokens: 200,
        cacheReadTokens: 300,
        cacheWriteTokens: 100,
        cacheWrite1hTokens: 40,
        reasoningTokens: 50,
        audioInputTokens: 7,
        imageInputTokens: 9,
      },
    });
    const position = await ingest(project, e, priced(3600));
    const expected = {
      position,
      eventId: e.eventId,
      occurredAt: at(10),
      provider: 'Acme.chat',
      model: 'acme/acme-large',
      usage: {
        inputTokens: 1000,
        outputTokens: 200,
        cacheReadTokens: 300,
        cacheWriteTokens: 100,
        cacheWrite1hTokens: 40,
        reasoningTokens: 50,
        audioInputTokens: 7,
        imageInputTokens: 9,
      },
      providerReported: false,
      sequence: 0,
      latest: {
        costMicros: 3600,
        inputCostMicros: 2600,
        outputCostMicros: 1000,
        costUnit: 'USD',
        source: 'override',
        priceId: 'override:a',
        unpriced: false,
      },
    };
    expect(await readRepriceBatch(prisma.sql, project, range(0, 60), null, 10)).toEqual([expected]);

    await correct(project, e, position, 1, priced(3600), UNPRICED);
    await correct(project, e, position, 2, UNPRICED, priced(5000, 'override:b'));
    expect(
      await readRepriceBatch(prisma.sql, project, range(0, 60, { provider: 'acme', model: 'acme-large' }), null, 10),
    ).toEqual([
      {
        ...expected,
        sequence: 2,
        latest: {
          costMicros: 5000,
          inputCostMicros: 4000,
          outputCostMicros: 1000,
          costUnit: 'USD',
          source: 'override',
          priceId: 'override:b',
          unpriced: false,
        },
      },
    ]);
  });

  it('reads an unpriced step as unpriced and a provider-reported one as such', async () => {
    const project = `p-${randomUUID()}`;
    const a = step(10);
    const b = step(11);
    await ingest(project, a, UNPRICED);
    await ingest(project, b, priced(7000, null, 'provider'));
    const read = await readRepriceBatch(prisma.sql, project, range(0, 60), null, 10);
    expect(read.map((s) => [s.eventId, s.providerReported, s.latest])).toEqual([
      [
        a.eventId,
        false,
        {
          costMicros: null,
          inputCostMicros: null,
          outputCostMicros: null,
          costUnit: null,
          source: null,
          priceId: null,
          unpriced: true,
        },
      ],
      [
        b.eventId,
        true,
        {
          costMicros: 7000,
          inputCostMicros: 6000,
          outputCostMicros: 1000,
          costUnit: 'USD',
          source: 'provider',
          priceId: null,
          unpriced: false,
        },
      ],
    ]);
  });

  it('reads [from, to) of one provider and model, in batches after a key, and counts the range alike', async () => {
    const project = `p-${randomUUID()}`;
    const s = [
      step(5),
      step(10),
      step(10),
      step(20, { provider: 'openai.responses', model: 'gpt-4o' }),
      step(30, { model: 'acme/acme-large' }),
      step(40),
    ];
    for (const e of s) await ingest(project, e, priced(3600));
    await ingest(`p-${randomUUID()}`, step(10), priced(3600));
    const ids = (rows: { eventId: string }[]) => rows.map((r) => r.eventId);
    const acme = range(5, 40, { provider: 'acme', model: 'acme-large' });
    const first = await readRepriceBatch(prisma.sql, project, acme, null, 2);
    expect(ids(first)).toEqual([s[0].eventId, s[1].eventId]);
    const last = first[first.length - 1];
    const second = await readRepriceBatch(prisma.sql, project, acme, last, 2);
    expect(ids(second)).toEqual([s[2].eventId, s[4].eventId]);
    expect(await readRepriceBatch(prisma.sql, project, acme, second[1], 2)).toEqual([]);
    expect(await countRangeSteps(prisma.sql, project, acme)).toBe(4);
    expect(ids(await readRepriceBatch(prisma.sql, project, range(0, 60, { provider: 'openai' }), null, 10))).toEqual([
      s[3].eventId,
    ]);
    expect(await countRangeSteps(prisma.sql, project, range(0, 60))).toBe(6);
    expect(await countRangeSteps(prisma.sql, project, range(0, 60, { model: 'gpt-4o' }))).toBe(1);
    expect(await countRangeSteps(prisma.sql, project, range(41, 60))).toBe(0);
  });

  it('counts the steps an override would price otherwise, never a provider-reported one', async () => {
    const project = `p-${randomUUID()}`;
    await ingest(project, step(10), priced(3600, 'override:a'));
    await ingest(project, step(20), priced(3600, 'override:b'));
    await ingest(project, step(30), UNPRICED);
    await ingest(project, step(40), priced(3600, 'override:b', 'provider'));
    await ingest(project, step(50, { model: 'other' }), UNPRICED);
    const q = {
      provider: 'acme',
      model: 'acme-large',
      from: at(0),
      to: null,
      priceId: 'override:b',
      includeOwn: false,
    };
    expect(await stepsPricedOtherwise(prisma.sql, project, q)).toEqual({ steps: 2, last: at(30) });
    expect(await stepsPricedOtherwise(prisma.sql, project, { ...q, includeOwn: true })).toEqual({
      steps: 3,
      last: at(30),
    });
    expect(await stepsPricedOtherwise(prisma.sql, project, { ...q, to: at(30) })).toEqual({ steps: 1, last: at(10) });
    expect(await stepsPricedOtherwise(prisma.sql, project, { ...q, from: at(31) })).toEqual({ steps: 0, last: null });
  });

  it('counts a corrected step by its latest price', async () => {
    const project = `p-${randomUUID()}`;
    const e = step(10);
    const position = await ingest(project, e, priced(3600, 'override:a'));
    const q = {
      provider: 'acme',
      model: 'acme-large',
      from: at(0),
      to: null,
      priceId: 'override:b',
      includeOwn: false,
    };
    expect((await stepsPricedOtherwise(prisma.sql, project, q)).steps).toBe(1);
    await correct(project, e, position, 1, priced(3600, 'override:a'), priced(4000, 'override:b'));
    expect(await stepsPricedOtherwise(prisma.sql, project, q)).toEqual({ steps: 0, last: null });
  });

  it('finds the earliest step still unpriced since a time', async () => {
    const project = `p-${randomUUID()}`;
    const early = step(10);
    const position = await ingest(project, early, UNPRICED);
    await ingest(project, step(20), UNPRICED);
    await ingest(project, step(5), priced(3600));
    await ingest(project, step(1, { model: 'other' }), UNPRICED);
    const q = { provider: 'acme', model: 'acme-large', since: at(0) };
    expect(await earliestUnpricedStep(prisma.sql, project, q)).toEqual(at(10));
    expect(await earliestUnpricedStep(prisma.sql, project, { ...q, since: at(11) })).toEqual(at(20));
    // Once the earliest is priced by a correction, the next one is.
    await correct(project, early, position, 1, UNPRICED, priced(3600));
    expect(await earliestUnpricedStep(prisma.sql, project, q)).toEqual(at(20));
    expect(await earliestUnpricedStep(prisma.sql, project, { ...q, since: at(21) })).toBeNull();
  });
});
