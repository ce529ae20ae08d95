import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import type { EventBus } from '@nestjs/cqrs';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { insertPricedSteps } from '../append-events/priced-steps.fixture';
import { writeGuardOutcome, type Reap } from '../check-guard/sql/guard-batch.sql';
import type { NewReservation } from '../budgets/guard-decision';
import { newReservation } from '../budgets/new-reservation.fixture';
import { systemEventId, type BudgetReserved } from '../events';
import { Repricer } from '../reprice/repricer';
import { closeReservations } from '../reservations/release-reservation.sql';
import { verifyLedger } from './verify-ledger.sql';

/**
 * verify is how an operator learns that a counter, a hold or a status no longer says what the log
 * says: a clean ledger written by the real statements must give nothing, and each kind of damage
 * exactly the one difference that names it.
 */
describe('verifyLedger (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  const repricer = new Repricer(prisma, { publish: () => undefined } as unknown as EventBus);
  // Two hours back, so the steps fill two hour buckets; its month (and this one) must have partitions.
  const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
  const earlier = new Date(hour - 2 * 3_600_000 + 61_000);
  beforeAll(() => new EventPartitions(prisma).ensureFor([earlier, new Date()]));
  afterAll(() => prisma.onModuleDestroy());

  let project: string;
  let rsv: (name: string) => string;
  beforeEach(async () => {
    project = `p-${randomUUID()}`;
    await prisma.sql.query(`INSERT INTO projects (id, name) VALUES ($1, 'verify spec')`, project);
    const run = randomUUID().slice(0, 8);
    rsv = (name) => `rsv_${name}_${run}`;
  });

  const step = (over: Partial<StepUsageEvent> = {}): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: new Date().toISOString(),
    traceId: 't1',
    runId: 'run-1',
    resourceId: 'r1',
    userId: 'u1',
    entityType: 'agent',
    provider: 'openai',
    model: 'gpt-4o',
    usage: { inputTokens: 1000, outputTokens: 200 },
    ...over,
  });
  const ingest = (...events: StepUsageEvent[]) => insertPricedSteps(prisma.sql, project, events);

  /** What the guard writes for a reservation it makes: the reservation, its holds and its BudgetReserved event. */
  const reserve = (rs: NewReservation[], reap?: Reap) =>
    writeGuardOutcome(
      prisma.sql,
      project,
      rs,
      rs.map((r): BudgetReserved => ({
        type: 'BudgetReserved',
        eventId: systemEventId('reservation', r.id, 'reserved'),
        occurredAt: r.createdAt,
        scopes: { traceId: 't1', resourceId: 'r1', userId: 'u1' },
        reservationId: r.id,
        data: {
          stepId: r.stepId,
          scopeKeys: r.scopeKeys,
          estimatedCost: r.costMicros / 1e6,
          costUnit: r.costUnit || null,
          inputTokens: r.inputTokens,
          outputTokens: r.outputTokens,
          inputTokensMargin: 1,
          expiresAt: r.expiresAt.toISOString(),
        },
      })),
      reap,
    );
  const held = (id: string, over: Partial<NewReservation> = {}) =>
    newReservation(rsv(id), { scopeKeys: ['resource:r1', 'user:u1'], ...over });
  const setPrice = (effectiveFrom: Date, inputPerMillion: number) =>
    prisma.sql.query(
      `INSERT INTO price_overrides (id, project_id, provider, model, effective_from, input_per_million, output_per_million)
       VALUES ($1, $2, 'acme', 'acme-large', $3, $4, 10)`,
      `prc_${randomUUID().slice(0, 8)}`,
      project,
      effectiveFrom,
      inputPerMillion,
    );
  const count = async (table: string, where = 'true') =>
    Number(
      (
        await prisma.sql.query<{ n: string }>(
          `SELECT count(*) AS n FROM ${table} WHERE project_id = $1 AND ${where}`,
          project,
        )
      )[0].n,
    );

  it('finds nothing in a ledger written by ingest, the guard, settlement, release, lapse, reaping and reprice', async () => {
    const past = new Date(Date.now() - 1_000);
    await reserve([held('settled'), held('released'), held('open'), held('lapsed', { expiresAt: past })]);
    // Expired before the sweep's range: left open, for the guard to reap.
    await reserve([held('reaped', { expiresAt: new Date(past.getTime() - 5_000), scopeKeys: ['user:u1'] })]);
    await ingest(
      step({ occurredAt: earlier.toISOString(), traceId: 't0', threadId: 'th1' }),
      step({
        runId: 't1',
        sessionId: 's1',
        reservationId: rsv('settled'),
        usage: { inputTokens: 3000, outputTokens: 900 },
      }),
      step({ provider: 'acme', model: 'acme-large', occurredAt: earlier.toISOString(), organizationId: 'o1' }),
      step({ provider: 'acme', model: 'acme-large', usage: { inputTokens: 10, outputTokens: 5 } }),
    );
    await closeReservations(prisma.sql, { projectId: project, id: rsv('released') }, 'released');
    await closeReservations(
      prisma.sql,
      { expiredBefore: new Date(), expiredAfter: new Date(past.getTime() - 1) },
      'lapsed',
    );
    // The next reservation on user:u1 takes out that scope's expired hold; its reservation stays open until swept.
    await reserve([held('reaping', { scopeKeys: ['user:u1'] })], { scopeKeys: ['user:u1'], expiredBy: new Date() });
    // Unpriced at ingest, then priced twice: the counters move by new − old each time.
    await setPrice(new Date(hour - 48 * 3_600_000), 3);
    await repricer.reprice(project, { from: new Date(hour - 24 * 3_600_000), to: new Date(Date.now() + 60_000) });
    await setPrice(new Date(hour - 24 * 3_600_000), 5);
    await repricer.reprice(project, { from: new Date(hour - 24 * 3_600_000), to: new Date(Date.now() + 60_000) });

    const statuses = await prisma.sql.query<{ id: string; status: string }>(
      'SELECT id, status FROM reservations WHERE project_id = $1 ORDER BY id',
      project,
    );
    expect(Object.fromEntries(statuses.map((r) => [r.id, r.status]))).toEqual({
      [rsv('settled')]: 'settled',
      [rsv('released')]: 'released',
      [rsv('open')]: 'open',
      [rsv('lapsed')]: 'lapsed',
      [rsv('reaped')]: 'open',
      [rsv('reaping')]: 'open',
    });
    expect(await count('events', "type = 'StepRepriced'")).toBe(4);
    expect(await count('reservation_holds')).toBe(3);
    expect(await count('usage_counters')).toBeGreaterThan(20);
    expect(await verifyLedger(prisma.sql, project)).toEqual([]);
  });

  it('names a tampered counter with what the log gives', async () => {
    await ingest(step(), step({ usage: { inputTokens: 500, outputTokens: 100 } }));
    await prisma.sql.query(
      `UPDATE usage_counters SET cost_micros = cost_micros + 7 WHERE project_id = $1 AND scope = 'resource' AND granularity = 'd'`,
      project,
    );
    const day = new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000).toISOString();
    // gpt-4o: 1500 × $2.50/M + 300 × $10/M.
    const expected = { inputTokens: 1500, outputTokens: 300, costMicros: 6750, unpricedEvents: 0, events: 2 };
    expect(await verifyLedger(prisma.sql, project)).toEqual([
      {
        project,
        table: 'usage_counters',
        key: { scope: 'resource', scopeId: 'r1', granularity: 'd', bucketStart: day, costUnit: 'USD' },
        stored: { ...expected, costMicros: 6757 },
        expected,
        issue: 'counter differs from the log',
      },
    ]);
  });

  it('names a tampered hold total with what its holds add up to', async () => {
    await reserve([held('a'), held('b')]);
    await prisma.sql.query(
      `UPDATE reservation_hold_totals SET holds = holds + 1 WHERE project_id = $1 AND scope_key = 'user:u1'`,
      project,
    );
    expect(await verifyLedger(prisma.sql, project)).toEqual([
      {
        project,
        table: 'reservation_hold_totals',
        key: { scopeKey: 'user:u1', costUnit: 'USD' },
        stored: { holds: 3, costMicros: 9000, inputTokens: 2000, outputTokens: 400 },
        expected: { holds: 2, costMicros: 9000, inputTokens: 2000, outputTokens: 400 },
        issue: 'hold total differs from its holds',
      },
    ]);
  });

  it('names a hold no open reservation has (its total moved with it)', async () => {
    const expiresAt = new Date(Date.now() + 60_000);
    await prisma.sql.query(
      `WITH h AS (
         INSERT INTO reservation_holds (project_id, scope_key, expires_at, reservation_id, cost_micros, cost_unit, input_tokens, output_tokens)
         VALUES ($1, 'resource:r1', $2, $3, 4500, 'USD', 1000, 200) RETURNING 1)
       INSERT INTO reservation_hold_totals (project_id, scope_key, cost_unit, holds, cost_micros, input_tokens, output_tokens)
       VALUES ($1, 'resource:r1', 'USD', 1, 4500, 1000, 200)`,
      project,
      expiresAt,
      rsv('ghost'),
    );
    expect(await verifyLedger(prisma.sql, project)).toEqual([
      {
        project,
        table: 'reservation_holds',
        key: { reservationId: rsv('ghost'), scopeKey: 'resource:r1' },
        stored: {
          holds: 1,
          expiresAt: expiresAt.toISOString(),
          costMicros: 4500,
          costUnit: 'USD',
          inputTokens: 1000,
          outputTokens: 200,
        },
        expected: null,
        issue: 'hold of a reservation that does not exist',
      },
    ]);
  });

  it('names an open reservation missing one of its holds (its total moved with it)', async () => {
    const r = held('a');
    await reserve([r]);
    await prisma.sql.query(
      `WITH gone AS (DELETE FROM reservation_holds WHERE project_id = $1 AND scope_key = 'user:u1' RETURNING 1)
       UPDATE reservation_hold_totals SET holds = 0, cost_micros = 0, input_tokens = 0, output_tokens = 0
        WHERE project_id = $1 AND scope_key = 'user:u1'`,
      project,
    );
    expect(await verifyLedger(prisma.sql, project)).toEqual([
      {
        project,
        table: 'reservation_holds',
        key: { reservationId: r.id, scopeKey: 'user:u1' },
        stored: null,
        expected: {
          holds: 1,
          expiresAt: r.expiresAt.toISOString(),
          costMicros: 4500,
          costUnit: 'USD',
          inputTokens: 1000,
          outputTokens: 200,
        },
        issue: 'open reservation without its hold',
      },
    ]);
  });

  it("names a reservation whose status is not the log's, and one the log never reserved", async () => {
    await reserve([held('a'), held('b')]);
    await closeReservations(prisma.sql, { projectId: project, id: rsv('a') }, 'released');
    await closeReservations(prisma.sql, { projectId: project, id: rsv('b') }, 'released');
    await prisma.sql.query(
      `UPDATE reservations SET status = 'settled' WHERE project_id = $1 AND id = $2`,
      project,
      rsv('a'),
    );
    await prisma.sql.query(
      `DELETE FROM events WHERE project_id = $1 AND reservation_id = $2 AND type = 'BudgetReserved'`,
      project,
      rsv('b'),
    );
    expect(await verifyLedger(prisma.sql, project)).toEqual([
      {
        project,
        table: 'events',
        key: { reservationId: rsv('b'), type: 'BudgetReserved' },
        stored: { events: 0 },
        expected: { events: 1 },
        issue: 'reservation without its BudgetReserved event',
      },
      {
        project,
        table: 'reservations',
        key: { id: rsv('a') },
        stored: { status: 'settled' },
        expected: { status: 'released' },
        issue: 'status disagrees with the log',
      },
    ]);
  });
});
