import type { GuardFinding } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import type { BudgetThresholdCrossed } from '../events';
import { alertEventPrefix, type AlertState } from './alert-decision';
import {
  alertOpeningStatements,
  commitAlertOutcome,
  fireExhausted,
  registerRequestAlerts,
  statesOf,
  writeAlertOutcome,
} from './alert-state.sql';
import { readAlerts } from './read-alerts.sql';

/** How alert states are stored and read back, and the alerts written with them, exactly once. */
describe('budget alert states (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());
  const now = new Date(Date.now() - 60_000);

  const state = (over: Partial<AlertState> = {}): AlertState => ({
    scopeKey: 'user:u1',
    window: '24h',
    source: 'request',
    limitType: 'cost',
    kind: 'threshold',
    threshold: 80,
    limit: 10_000_000,
    unit: 'USD',
    hysteresis: 5,
    fired: false,
    firedCount: 0,
    ...over,
  });
  /** The stored states of the scope keys, read as a commit reads them (with its opening statements). */
  const stored = (project: string, scopeKeys: string[]) =>
    prisma.transaction(
      async (_tx, opened) =>
        statesOf(opened[opened.length - 1]).sort(
          (a, b) => a.scopeKey.localeCompare(b.scopeKey) || a.threshold - b.threshold,
        ),
      undefined,
      alertOpeningStatements(project, scopeKeys, scopeKeys),
    );
  const crossed = (s: AlertState, usage: number): BudgetThresholdCrossed => ({
    type: 'BudgetThresholdCrossed',
    eventId: `${alertEventPrefix(s)}${s.firedCount}`,
    occurredAt: now,
    scopes: { userId: s.scopeKey.slice('user:'.length) },
    data: {
      scope: 'user',
      scopeKey: s.scopeKey,
      window: s.window,
      source: s.source,
      limitType: s.limitType,
      usage,
      limit: s.limit / 1e6,
      unit: s.unit,
      threshold: s.threshold,
      hysteresis: s.hysteresis,
      stepEventId: 'step-1',
      sequence: s.firedCount,
    },
  });

  it('registers request thresholds armed, once; a changed limit updates it and keeps whether it fired', async () => {
    const project = `p-${randomUUID()}`;
    const s80 = state();
    const s50 = state({ threshold: 50 });
    const run = state({ scopeKey: 'run:t1', window: null, limitType: 'outputTokens', limit: 5000, unit: 'tokens' });
    expect(await registerRequestAlerts(prisma.sql, project, [s80, s50, run])).toBe(3);
    expect(await stored(project, ['user:u1', 'run:t1'])).toEqual([run, s50, s80]);
    expect(await registerRequestAlerts(prisma.sql, project, [s80, s50, run])).toBe(0);
    expect(await registerRequestAlerts(prisma.sql, project, [])).toBe(0);

    await writeAlertOutcome(prisma.sql, project, [{ ...s80, fired: true, firedCount: 1 }], [], now);
    expect(await registerRequestAlerts(prisma.sql, project, [{ ...s80, limit: 20_000_000, hysteresis: 10 }])).toBe(1);
    expect(await stored(project, ['user:u1'])).toEqual([
      s50,
      { ...s80, limit: 20_000_000, hysteresis: 10, fired: true, firedCount: 1 },
    ]);
    // Only the named scope keys' states are read, of this project only.
    expect(await stored(project, ['user:u2'])).toEqual([]);
    expect(await stored(`p-${randomUUID()}`, ['user:u1'])).toEqual([]);
    expect(await stored(project, [])).toEqual([]);
  });

  it('stores changed states and appends their crossings once, in a transaction that goes on or at its commit', async () => {
    const project = `p-${randomUUID()}`;
    const fired = state({ fired: true, firedCount: 1 });
    const event = crossed(fired, 8.5);
    expect(await writeAlertOutcome(prisma.sql, project, [fired], [event], now)).toEqual([event.eventId]);
    expect(await stored(project, ['user:u1'])).toEqual([fired]);
    // The same crossing again (a retried commit): the state is written, the event is not.
    expect(await writeAlertOutcome(prisma.sql, project, [fired], [event], now)).toEqual([]);
    expect(await readAlerts(prisma.sql, project, undefined, 10)).toEqual([
      {
        eventId: event.eventId,
        kind: 'BudgetThresholdCrossed',
        occurredAt: now.toISOString(),
        scope: 'user',
        scopeKey: 'user:u1',
        window: '24h',
        source: 'request',
        limitType: 'cost',
        threshold: 80,
        usage: 8.5,
        limit: 10,
        unit: 'USD',
        stepEventId: 'step-1',
      },
    ]);
    // Re-armed, then fired a second time, with COMMIT.
    const rearmed = { ...fired, fired: false };
    const again = { ...fired, firedCount: 2 };
    const written = await prisma.transaction(async (tx) => {
      await writeAlertOutcome(tx, project, [rearmed], [], now);
      return commitAlertOutcome(tx, project, [again], [crossed(again, 9)], now);
    });
    expect(written).toEqual([`${alertEventPrefix(again)}2`]);
    expect(await stored(project, ['user:u1'])).toEqual([again]);
    expect((await readAlerts(prisma.sql, project, undefined, 10)).map((a) => [a.eventId, a.usage])).toEqual([
      [`${alertEventPrefix(again)}2`, 9],
      [event.eventId, 8.5],
    ]);
  });

  it('fires an exhausted budget once per denial streak, and again after it re-armed', async () => {
    const project = `p-${randomUUID()}`;
    const finding: GuardFinding = {
      scope: 'user',
      scopeKey: 'user:u1',
      window: '24h',
      limitType: 'cost',
      usage: 12.5,
      limit: 10,
      unit: 'USD',
      threshold: 'hard',
      source: 'policy:daily',
    };
    const exhausted = state({
      source: 'policy:daily',
      kind: 'exhausted',
      threshold: 100,
      hysteresis: 5,
      fired: true,
      firedCount: 1,
    });
    // Two denials of the same budget in one call: one alert.
    const first = await fireExhausted(
      prisma.sql,
      project,
      [
        { finding, hysteresis: 5, stepId: 'check-1' },
        { finding: { ...finding, usage: 13 }, hysteresis: 5, stepId: 'check-2' },
      ],
      now,
    );
    expect(first).toEqual([`${alertEventPrefix(exhausted)}1`]);
    expect(await stored(project, ['user:u1'])).toEqual([exhausted]);
    expect(await fireExhausted(prisma.sql, project, [{ finding, hysteresis: 5, stepId: 'check-3' }], now)).toEqual([]);
    expect(await readAlerts(prisma.sql, project, undefined, 10)).toEqual([
      {
        eventId: `${alertEventPrefix(exhausted)}1`,
        kind: 'BudgetExhausted',
        occurredAt: now.toISOString(),
        scope: 'user',
        scopeKey: 'user:u1',
        window: '24h',
        source: 'policy:daily',
        limitType: 'cost',
        threshold: 100,
        usage: 12.5,
        limit: 10,
        unit: 'USD',
        stepId: 'check-1',
      },
    ]);
    // A commit found the usage back under 95%: re-armed; the next denial alerts again.
    await writeAlertOutcome(prisma.sql, project, [{ ...exhausted, fired: false }], [], now);
    expect(await fireExhausted(prisma.sql, project, [{ finding, hysteresis: 5, stepId: 'check-4' }], now)).toEqual([
      `${alertEventPrefix(exhausted)}2`,
    ]);
    expect(await stored(project, ['user:u1'])).toEqual([{ ...exhausted, firedCount: 2 }]);
    expect(await fireExhausted(prisma.sql, project, [], now)).toEqual([]);
  });
});
