import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService, withIndexPlans } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../../test/support/env';
import { insertPricedSteps } from '../../append-events/priced-steps.fixture';
import { systemEventId, type SystemEvent } from '../../events';
import { usageKey, type NewReservation } from '../../budgets/guard-decision';
import { newReservation } from '../../budgets/new-reservation.fixture';
import { boundOf, type UsageBound } from '../../budgets/usage-bounds';
import { readScopeUsage, usageRead, type UsageRequest } from '../../scope-usage/read-scope-usage.sql';
import { lockScopesStatements, writeGuardOutcome } from './guard-batch.sql';
import { reserveInOneTripStatement } from './reserve-in-one-trip.sql';

/**
 * The one-trip reservation writes only when the usage it reads under the locks is within the
 * bound the check was decided on: every component, per unit for money; a request without a bound
 * (a forecast's last hour) does not gate it. Whatever it decides, it writes nothing else.
 */
describe('reserveInOneTripStatement (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const HOURLY: UsageRequest = { scope: 'resource', scopeId: 'r1', window: '1h' };
  const LAST_HOUR_OF_USER: UsageRequest = { scope: 'user', scopeId: 'u1', window: '1h', holds: false };
  const KEY = usageKey('resource:r1', '1h');

  const step = (model: string, inputTokens: number, outputTokens: number): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: new Date().toISOString(),
    traceId: 'trace-1',
    resourceId: 'r1',
    userId: 'u1',
    entityType: 'agent',
    provider: 'openai',
    model,
    usage: { inputTokens, outputTokens },
  });
  const record = (project: string, events: StepUsageEvent[]) => insertPricedSteps(prisma.sql, project, events);
  const reservedEvent = (r: NewReservation): SystemEvent => ({
    type: 'BudgetReserved',
    eventId: systemEventId('reservation', r.id, 'reserved'),
    occurredAt: r.createdAt,
    reservationId: r.id,
    scopes: { resourceId: 'r1', traceId: 't1' },
    data: {
      stepId: r.stepId,
      scopeKeys: r.scopeKeys,
      estimatedCost: r.costMicros / 1e6,
      costUnit: r.costUnit,
      inputTokens: r.inputTokens,
      outputTokens: r.outputTokens,
      inputTokensMargin: 1,
      expiresAt: r.expiresAt.toISOString(),
    },
  });

  /** A project whose resource r1 has a priced step (gpt-4o, $0.0045), an unpriced one, and an open hold. */
  async function project(): Promise<string> {
    const id = `p-${randomUUID()}`;
    await record(id, [step('gpt-4o', 1000, 200), step('acme-unknown-1', 300, 30)]);
    await writeGuardOutcome(prisma.sql, id, [newReservation(`rsv_${randomUUID().replace(/-/g, '')}`)], []);
    return id;
  }

  const requests = [HOURLY, LAST_HOUR_OF_USER];
  async function boundNow(projectId: string): Promise<UsageBound> {
    return boundOf((await readScopeUsage(prisma.sql, projectId, requests, new Date())).get(KEY)!);
  }

  async function reserve(projectId: string, bound: UsageBound | undefined) {
    const at = new Date();
    const r = newReservation(`rsv_${randomUUID().replace(/-/g, '')}`, { createdAt: at });
    const read = usageRead(projectId, requests, at);
    const trip = reserveInOneTripStatement(
      projectId,
      [r],
      [reservedEvent(r)],
      { scopeKeys: ['resource:r1'], expiredBy: at },
      read,
      new Map(bound ? [[0, bound]] : []),
    );
    const rows = await prisma.oneTrip(
      withIndexPlans([...lockScopesStatements(projectId, ['resource:r1']), trip.statement]),
    );
    const [reservations] = await prisma.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM reservations WHERE project_id = $1 AND id = $2',
      projectId,
      r.id,
    );
    const [events] = await prisma.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND reservation_id = $2',
      projectId,
      r.id,
    );
    return { ...trip.outcome(rows[rows.length - 2]), written: { reservations: reservations.n, events: events.n }, r };
  }

  it('reserves when the usage under the locks is exactly the bound, and answers that usage (before its own hold)', async () => {
    const p = await project();
    const before = await readScopeUsage(prisma.sql, p, requests, new Date());
    expect(before.get(KEY)).toMatchObject({ inputTokens: 1300, outputTokens: 230, unpricedEvents: 1 });
    const out = await reserve(p, boundOf(before.get(KEY)!));
    expect({ ok: out.ok, made: [...out.made], written: out.written }).toEqual({
      ok: true,
      made: [out.r.id],
      written: { reservations: 1, events: 1 },
    });
    expect(out.usage).toEqual(before);
    expect((await readScopeUsage(prisma.sql, p, requests, new Date())).get(KEY)).toMatchObject({
      reservedInputTokens: 2000,
      reservedOutputTokens: 400,
      reservedCostByUnit: { USD: 9000 },
    });
  });

  it('reserves when the usage is below the bound (a step settled for less than it held)', async () => {
    const p = await project();
    const bound = await boundNow(p);
    const out = await reserve(p, { ...bound, tin: bound.tin + 500, cost: { USD: bound.cost.USD + 1 } });
    expect({ ok: out.ok, written: out.written }).toEqual({ ok: true, written: { reservations: 1, events: 1 } });
  });

  const over: [string, (b: UsageBound) => UsageBound][] = [
    ['one input token', (b) => ({ ...b, tin: b.tin - 1 })],
    ['one output token', (b) => ({ ...b, tout: b.tout - 1 })],
    ['one micro-unit of its unit', (b) => ({ ...b, cost: { USD: b.cost.USD - 1 } })],
    ['a unit the bound does not name', (b) => ({ ...b, cost: { JPY: 10 ** 12 } })],
    ['one unpriced step', (b) => ({ ...b, ev: b.ev - 1 })],
    ['one unpriced input token', (b) => ({ ...b, uin: b.uin - 1 })],
    ['one unpriced output token', (b) => ({ ...b, uout: b.uout - 1 })],
  ];
  it.each(over)('writes nothing when the usage is above the bound by %s', async (_, tighter) => {
    const p = await project();
    const out = await reserve(p, tighter(await boundNow(p)));
    expect({ ok: out.ok, made: out.made.size, written: out.written }).toEqual({
      ok: false,
      made: 0,
      written: { reservations: 0, events: 0 },
    });
  });

  it('sees what another writer committed before its locks were taken', async () => {
    const p = await project();
    const bound = await boundNow(p);
    await record(p, [step('gpt-4o', 10, 0)]);
    expect((await reserve(p, bound)).ok).toBe(false);
  });

  it('is not gated by a request it has no bound for (a forecast reads the last hour apart)', async () => {
    const p = await project();
    const out = await reserve(p, undefined);
    expect({ ok: out.ok, written: out.written }).toEqual({ ok: true, written: { reservations: 1, events: 1 } });
    expect(out.usage.get(usageKey('user:u1', '1h'))).toMatchObject({ inputTokens: 1300, reservedInputTokens: 0 });
  });

  it("keeps a step's reservation: a second one for the same step is not made, nor its event", async () => {
    const p = await project();
    const first = await reserve(p, undefined);
    const at = new Date();
    const again = newReservation(`rsv_${randomUUID().replace(/-/g, '')}`, { stepId: first.r.stepId, createdAt: at });
    const read = usageRead(p, requests, at);
    const trip = reserveInOneTripStatement(
      p,
      [again],
      [reservedEvent(again)],
      { scopeKeys: [], expiredBy: at },
      read,
      new Map(),
    );
    const rows = await prisma.oneTrip(withIndexPlans([...lockScopesStatements(p, ['resource:r1']), trip.statement]));
    const out = trip.outcome(rows[rows.length - 2]);
    expect({ ok: out.ok, made: out.made.size }).toEqual({ ok: true, made: 0 });
    const [events] = await prisma.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND reservation_id = $2',
      p,
      again.id,
    );
    expect(events.n).toBe(0);
  });
});
