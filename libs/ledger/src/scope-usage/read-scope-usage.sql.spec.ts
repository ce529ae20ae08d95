import { WINDOW_MS, type StepUsageEvent, type Window } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { insertStepEvents } from '../append-events/insert-step-events.sql';
import { priceStep } from '../pricing/price-step';
import { emptyUsage, usageKey } from '../budgets/guard-decision';
import { writeGuardOutcome } from '../check-guard/sql/guard-batch.sql';
import { readScopeUsage } from './read-scope-usage.sql';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

/**
 * What the guard reads as a scope's usage: committed steps in the rolling window (exact edges, from
 * the hour and day counters and the log's partial hours) plus what open reservations hold. Written
 * against readScopeUsage's answers only, not its SQL.
 */
describe('readScopeUsage (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  afterAll(() => prisma.onModuleDestroy());
  // Half past an hour, so a 24h window starts and ends inside an hour (both raw edges are used).
  const now = new Date(Math.floor(Date.now() / HOUR) * HOUR - HOUR + 30 * MIN);
  const ago = (ms: number) => new Date(now.getTime() - ms);

  const step = (
    occurredAt: Date,
    inputTokens: number,
    outputTokens: number,
    over: Partial<StepUsageEvent> = {},
  ): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: occurredAt.toISOString(),
    traceId: 'trace-1',
    resourceId: 'r1',
    entityType: 'agent',
    provider: 'openai',
    model: 'gpt-4o', // $2.50 per million input tokens, $10 per million output tokens
    usage: { inputTokens, outputTokens },
    ...over,
  });
  const insert = async (project: string, events: StepUsageEvent[]) => {
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
  };
  const hold = (
    project: string,
    id: string,
    expiresAt: Date,
    costMicros: number,
    inputTokens: number,
    outputTokens: number,
  ) =>
    writeGuardOutcome(
      prisma.sql,
      project,
      [
        {
          id,
          stepId: `step-${id}`,
          scopeKeys: ['resource:r1'],
          contextKeys: ['resource:r1', 'run:trace-1'],
          costMicros,
          costUnit: 'USD',
          inputTokens,
          outputTokens,
          rawInputTokens: inputTokens,
          provider: 'openai',
          model: 'gpt-4o',
          createdAt: ago(MIN),
          expiresAt,
        },
      ],
      [],
    );

  it('sums a rolling window exactly at both edges: the counters for whole hours and days, the log for the partial hours', async () => {
    const project = `p-${randomUUID()}`;
    await insert(project, [
      step(ago(10 * MIN), 1000, 200), // current partial hour: 2500 + 2000 micros
      step(ago(3 * HOUR), 2000, 100), // a whole hour: 5000 + 1000
      step(ago(DAY - 10 * MIN), 500, 50), // inside the 24h window's first, partial hour: 1250 + 500
      step(ago(DAY + 10 * MIN), 4000, 0), // just before the 24h window: only in 7d (10000)
      step(ago(2 * DAY), 100, 0), // a whole day back: only in 7d (250)
      step(ago(8 * DAY), 9000, 9000), // outside 7d
      step(ago(10 * MIN), 7000, 7000, { resourceId: 'r2' }), // another resource
    ]);
    const usage = await readScopeUsage(
      prisma.sql,
      project,
      [
        { scope: 'resource', scopeId: 'r1', window: '1h' },
        { scope: 'resource', scopeId: 'r1', window: '24h' },
        { scope: 'resource', scopeId: 'r1', window: '7d' },
        { scope: 'resource', scopeId: 'r2', window: '24h' },
        { scope: 'resource', scopeId: 'nobody', window: '24h' },
      ],
      now,
    );
    expect(usage.get(usageKey('resource:r1', '1h'))).toEqual({
      ...emptyUsage(),
      inputTokens: 1000,
      outputTokens: 200,
      costByUnit: { USD: 4500 },
    });
    expect(usage.get(usageKey('resource:r1', '24h'))).toEqual({
      ...emptyUsage(),
      inputTokens: 3500,
      outputTokens: 350,
      costByUnit: { USD: 12_250 },
    });
    expect(usage.get(usageKey('resource:r1', '7d'))).toEqual({
      ...emptyUsage(),
      inputTokens: 7600,
      outputTokens: 350,
      costByUnit: { USD: 22_500 },
    });
    expect(usage.get(usageKey('resource:r2', '24h'))).toEqual({
      ...emptyUsage(),
      inputTokens: 7000,
      outputTokens: 7000,
      costByUnit: { USD: 87_500 },
    });
    expect(usage.get(usageKey('resource:nobody', '24h'))).toEqual(emptyUsage());
    expect(usage.size).toBe(5);
  });

  it('reads every window of several scopes in one statement, each as exact as alone, however many windows a scope has', async () => {
    const project = `p-${randomUUID()}`;
    // Each window's start edge: a step just inside it and one just outside, on r1 and u1; and one in the current hour.
    const windows = Object.entries(WINDOW_MS) as [Window, number][];
    const steps = [step(ago(5 * MIN), 1, 0, { userId: 'u1' })];
    windows.forEach(([, ms], k) => {
      steps.push(step(ago(ms - 10 * MIN), 2 ** (2 * k + 1), 0, { userId: 'u1' }));
      steps.push(step(ago(ms + 10 * MIN), 2 ** (2 * k + 2), 0, { userId: 'u1' }));
    });
    steps.push(step(ago(20 * MIN), 0, 3, { resourceId: 'r2' }));
    await insert(project, steps);
    const inside = (ms: number) =>
      steps
        .filter((e) => e.resourceId === 'r1' && Date.parse(e.occurredAt) >= now.getTime() - ms)
        .reduce((n, e) => n + (e.usage.inputTokens ?? 0), 0);
    const requests = [
      ...windows.map(([window]) => ({ scope: 'resource' as const, scopeId: 'r1', window })),
      ...(['1h', '7d', '365d'] as const).map((window) => ({ scope: 'user' as const, scopeId: 'u1', window })),
      { scope: 'resource' as const, scopeId: 'r2', window: '24h' as const },
    ];
    const usage = await readScopeUsage(prisma.sql, project, requests, now);
    for (const [window, ms] of windows) {
      expect(usage.get(usageKey('resource:r1', window))!.inputTokens).toBe(inside(ms));
      // Every request reads what it would read alone.
      const alone = await readScopeUsage(prisma.sql, project, [{ scope: 'resource', scopeId: 'r1', window }], now);
      expect(usage.get(usageKey('resource:r1', window))).toEqual(alone.get(usageKey('resource:r1', window)));
    }
    for (const window of ['1h', '7d', '365d'] as const)
      expect(usage.get(usageKey('user:u1', window))!.inputTokens).toBe(inside(WINDOW_MS[window]));
    expect(usage.get(usageKey('resource:r2', '24h'))).toMatchObject({ inputTokens: 0, outputTokens: 3 });
  });

  it('counts a step dated after now (a fast client clock) from its commit on', async () => {
    const project = `p-${randomUUID()}`;
    await insert(project, [step(new Date(now.getTime() + 2 * MIN), 1000, 0)]);
    const usage = await readScopeUsage(prisma.sql, project, [{ scope: 'resource', scopeId: 'r1', window: '1h' }], now);
    expect(usage.get(usageKey('resource:r1', '1h'))).toEqual({
      ...emptyUsage(),
      inputTokens: 1000,
      costByUnit: { USD: 2500 },
    });
  });

  it('a run has no window: every step of the trace, however old', async () => {
    const project = `p-${randomUUID()}`;
    await insert(project, [
      step(ago(10 * MIN), 1000, 200),
      step(ago(40 * DAY), 2000, 100, { resourceId: 'r9' }),
      step(ago(MIN), 5, 5, { traceId: 'trace-2' }),
    ]);
    const usage = await readScopeUsage(prisma.sql, project, [{ scope: 'run', scopeId: 'trace-1', window: '24h' }], now);
    // The key of a run's usage carries no window, whatever the request said.
    expect([...usage.keys()]).toEqual(['run:trace-1']);
    expect(usage.get('run:trace-1')).toEqual({
      ...emptyUsage(),
      inputTokens: 3000,
      outputTokens: 300,
      costByUnit: { USD: 10_500 },
    });
  });

  it('keeps unpriced usage apart from cost: its tokens count, its events are counted, no money is made up', async () => {
    const project = `p-${randomUUID()}`;
    await insert(project, [
      step(ago(10 * MIN), 1000, 200),
      step(ago(20 * MIN), 300, 30, { provider: 'acme', model: 'no-such-model' }),
      step(ago(5 * HOUR), 700, 70, { provider: 'acme', model: 'no-such-model' }),
    ]);
    const usage = await readScopeUsage(prisma.sql, project, [{ scope: 'resource', scopeId: 'r1', window: '24h' }], now);
    expect(usage.get(usageKey('resource:r1', '24h'))).toEqual({
      ...emptyUsage(),
      inputTokens: 2000,
      outputTokens: 300,
      costByUnit: { USD: 4500 },
      unpricedEvents: 2,
      unpricedInputTokens: 1000,
      unpricedOutputTokens: 100,
    });
  });

  it('adds what open reservations hold in every window of their scope, until they expire', async () => {
    const project = `p-${randomUUID()}`;
    await insert(project, [step(ago(10 * MIN), 1000, 200)]);
    await hold(project, `rsv_${randomUUID().slice(0, 8)}`, new Date(now.getTime() + MIN), 4500, 1000, 200);
    await hold(project, `rsv_${randomUUID().slice(0, 8)}`, new Date(now.getTime() + 5 * MIN), 1500, 400, 50);
    await hold(project, `rsv_${randomUUID().slice(0, 8)}`, now, 9999, 9999, 9999); // expires at now: holds nothing
    const usage = await readScopeUsage(
      prisma.sql,
      project,
      [
        { scope: 'resource', scopeId: 'r1', window: '1h' },
        { scope: 'resource', scopeId: 'r1', window: '30d' },
      ],
      now,
    );
    const held = { reservedInputTokens: 1400, reservedOutputTokens: 250, reservedCostByUnit: { USD: 6000 } };
    expect(usage.get(usageKey('resource:r1', '1h'))).toEqual({
      ...emptyUsage(),
      inputTokens: 1000,
      outputTokens: 200,
      costByUnit: { USD: 4500 },
      ...held,
    });
    expect(usage.get(usageKey('resource:r1', '30d'))).toEqual({
      ...emptyUsage(),
      inputTokens: 1000,
      outputTokens: 200,
      costByUnit: { USD: 4500 },
      ...held,
    });
  });

  it('leaves reservations out of a request that asks for committed usage only (holds: false), and in for the scope’s other windows', async () => {
    const project = `p-${randomUUID()}`;
    await insert(project, [step(ago(10 * MIN), 1000, 200)]);
    await hold(project, `rsv_${randomUUID().slice(0, 8)}`, new Date(now.getTime() + MIN), 4500, 1000, 200);
    const usage = await readScopeUsage(
      prisma.sql,
      project,
      [
        { scope: 'resource', scopeId: 'r1', window: '1h', holds: false },
        { scope: 'resource', scopeId: 'r1', window: '24h' },
      ],
      now,
    );
    const committed = { ...emptyUsage(), inputTokens: 1000, outputTokens: 200, costByUnit: { USD: 4500 } };
    expect(usage.get(usageKey('resource:r1', '1h'))).toEqual(committed);
    expect(usage.get(usageKey('resource:r1', '24h'))).toEqual({
      ...committed,
      reservedInputTokens: 1000,
      reservedOutputTokens: 200,
      reservedCostByUnit: { USD: 4500 },
    });
  });

  it('reads nothing for no requests', async () => {
    expect(await readScopeUsage(prisma.sql, `p-${randomUUID()}`, [], now)).toEqual(new Map());
  });
});
