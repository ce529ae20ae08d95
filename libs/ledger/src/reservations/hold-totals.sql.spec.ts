import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { insertStepEvents } from '../append-events/insert-step-events.sql';
import { writeGuardOutcome } from '../check-guard/sql/guard-batch.sql';
import type { NewReservation } from '../budgets/guard-decision';
import { newReservation } from '../budgets/new-reservation.fixture';
import { guardRead } from '../scope-usage/read-scope-usage.sql';
import { priceStep } from '../pricing/price-step';
import { closeReservations } from './release-reservation.sql';

/**
 * The guard reads a scope's open reservations from their totals, so every statement that adds or
 * takes holds must move the totals by the same rows: a total that drifts from its holds would
 * let the guard over- or under-count every check of that scope from then on.
 */
describe('reservation hold totals (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  let project: string;
  let rsv: (name: string) => string;
  beforeEach(() => {
    project = `p-${randomUUID()}`;
    const run = randomUUID().slice(0, 8);
    rsv = (name) => `rsv_${name}_${run}`;
  });

  const reservation = (id: string, over: Partial<NewReservation> = {}) =>
    newReservation(id, { scopeKeys: ['resource:r1', 'user:u1'], ...over });
  const reserve = (...rs: NewReservation[]) => writeGuardOutcome(prisma.sql, project, rs, []);
  const settle = (reservationId: string) => {
    const e: StepUsageEvent = {
      eventId: `e-${randomUUID()}`,
      occurredAt: new Date().toISOString(),
      traceId: 't1',
      resourceId: 'r1',
      userId: 'u1',
      entityType: 'agent',
      provider: 'openai',
      model: 'gpt-4o',
      usage: { inputTokens: 900, outputTokens: 150 },
      reservationId,
    };
    return insertStepEvents(prisma.sql, project, [
      { event: e, occurredAt: new Date(e.occurredAt), cost: priceStep(e, new Date(), []) },
    ]);
  };

  /** Per (scope, unit): the totals as stored, and the sums of the holds they stand for. */
  const totalsAndHolds = async () => {
    const [totals, holds] = await Promise.all(
      [
        `SELECT scope_key, cost_unit, holds::int, cost_micros::int, input_tokens::int, output_tokens::int
           FROM reservation_hold_totals WHERE project_id = $1`,
        `SELECT scope_key, cost_unit, count(*)::int AS holds, sum(cost_micros)::int AS cost_micros, sum(input_tokens)::int AS input_tokens,
                sum(output_tokens)::int AS output_tokens FROM reservation_holds WHERE project_id = $1 GROUP BY scope_key, cost_unit`,
      ].map((text) =>
        prisma.sql.query<Record<string, string | number | bigint>>(text, project).then((rows) =>
          rows
            .map((r) =>
              Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'string' ? v : Number(v)])),
            )
            // A scope whose holds are all gone keeps a row of zeros.
            .filter((r) => r.holds !== 0)
            .sort((a, b) => `${a.scope_key}/${a.cost_unit}`.localeCompare(`${b.scope_key}/${b.cost_unit}`)),
        ),
      ),
    );
    return { totals, holds };
  };
  const expectTotalsToMatchHolds = async (scopes: number) => {
    const { totals, holds } = await totalsAndHolds();
    expect(totals).toEqual(holds);
    expect(totals).toHaveLength(scopes);
  };

  it('moves with every statement that adds or takes holds: reserve, settle, release, lapse', async () => {
    await reserve(
      reservation(rsv('a')),
      reservation(rsv('b'), { costUnit: 'EUR', costMicros: 3000 }),
      reservation(rsv('c'), { scopeKeys: ['resource:r1'], costUnit: '', costMicros: 0 }),
      reservation(rsv('d'), { expiresAt: new Date(Date.now() - 1_000) }),
    );
    // resource:r1 in USD, EUR and '' (unpriced); user:u1 in USD and EUR.
    await expectTotalsToMatchHolds(5);
    const [usd] = (await totalsAndHolds()).totals.filter((t) => t.scope_key === 'resource:r1' && t.cost_unit === 'USD');
    expect(usd).toMatchObject({ holds: 2, cost_micros: 9000, input_tokens: 2000, output_tokens: 400 });

    await settle(rsv('a'));
    await expectTotalsToMatchHolds(5);
    expect(await closeReservations(prisma.sql, { projectId: project, id: rsv('b') }, 'released')).toHaveLength(1);
    await expectTotalsToMatchHolds(3);
    // The sweeper lapses d (expired) only; settling or releasing twice takes nothing more.
    expect((await closeReservations(prisma.sql, { expiredBefore: new Date() }, 'lapsed')).map((r) => r.id)).toContain(
      rsv('d'),
    );
    await settle(rsv('a'));
    await closeReservations(prisma.sql, { projectId: project, id: rsv('b') }, 'released');
    await expectTotalsToMatchHolds(1);
    await closeReservations(prisma.sql, { projectId: project, id: rsv('c') }, 'released');
    await expectTotalsToMatchHolds(0);
  });

  it('counts open holds only: one past its expiry holds nothing, before and after the sweep', async () => {
    const read = async () => {
      const usage = await guardRead(prisma, project, [{ scope: 'resource', scopeId: 'r1', window: '24h' }], new Date());
      const u = [...usage.values()][0];
      return { cost: u.reservedCostByUnit, input: u.reservedInputTokens, output: u.reservedOutputTokens };
    };
    await reserve(
      reservation(rsv('open')),
      reservation(rsv('eur'), { costUnit: 'EUR', costMicros: 3000 }),
      reservation(rsv('gone'), { expiresAt: new Date(Date.now() - 1_000), costMicros: 7000, inputTokens: 5000 }),
    );
    const open = { cost: { USD: 4500, EUR: 3000 }, input: 2000, output: 400 };
    expect(await read()).toEqual(open);
    await closeReservations(prisma.sql, { expiredBefore: new Date() }, 'lapsed');
    expect(await read()).toEqual(open);
    await closeReservations(prisma.sql, { projectId: project, id: rsv('eur') }, 'released');
    expect(await read()).toEqual({ cost: { USD: 4500 }, input: 1000, output: 200 });
  });

  it("takes a scope's expired holds out with the next reservation on it, sweeper or not", async () => {
    const past = new Date(Date.now() - 1_000);
    await reserve(...Array.from({ length: 500 }, (_, i) => reservation(rsv(`old${i}`), { expiresAt: past })));
    await writeGuardOutcome(prisma.sql, project, [reservation(rsv('new'), { scopeKeys: ['resource:r1'] })], [], {
      scopeKeys: ['resource:r1'],
      expiredBy: new Date(),
    });
    const left = await prisma.sql.query<{ scope_key: string; n: number }>(
      'SELECT scope_key, count(*)::int AS n FROM reservation_holds WHERE project_id = $1 GROUP BY scope_key ORDER BY scope_key',
      project,
    );
    // Only the scopes the reservation was made under: user:u1's expired holds wait for the sweeper.
    expect(left).toEqual([
      { scope_key: 'resource:r1', n: 1 },
      { scope_key: 'user:u1', n: 500 },
    ]);
    await expectTotalsToMatchHolds(2);
    // Their reservations are still the sweeper's to lapse (and to log), and it takes nothing twice.
    const lapsed = await closeReservations(prisma.sql, { expiredBefore: new Date() }, 'lapsed');
    expect(lapsed.filter((r) => r.project_id === project)).toHaveLength(500);
    await expectTotalsToMatchHolds(1);
  });

  it("reads a scope's totals, not each of its open holds", async () => {
    await reserve(
      ...Array.from({ length: 3000 }, (_, i) => reservation(rsv(`many${i}`), { scopeKeys: ['resource:r1'] })),
    );
    const fetched = async () => {
      await prisma.pool.query('SELECT pg_stat_force_next_flush()');
      const { rows } = await prisma.pool.query<{ n: string }>(
        `SELECT coalesce(sum(idx_tup_fetch), 0)::text AS n FROM pg_stat_user_tables WHERE relname = 'reservation_holds'`,
      );
      return Number(rows[0].n);
    };
    const before = await fetched();
    for (let i = 0; i < 5; i++) {
      const usage = await guardRead(prisma, project, [{ scope: 'resource', scopeId: 'r1', window: '24h' }], new Date());
      expect([...usage.values()][0].reservedCostByUnit).toEqual({ USD: 3000 * 4500 });
    }
    // Five reads of 3,000 holds each read 15,000 of them before the totals.
    expect((await fetched()) - before).toBeLessThan(50);
  }, 60_000);
});
