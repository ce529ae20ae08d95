import { EventPartitions, inTransaction, PrismaService, withIndexPlans } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { TEST_DATABASE_URL } from '../../../../../test/support/env';
import { systemEventId, type SystemEvent } from '../../events';
import type { NewReservation } from '../../budgets/guard-decision';
import { newReservation } from '../../budgets/new-reservation.fixture';
import { scopeLockId } from '../../scope-usage/scope-lock';
import {
  existingByStep,
  lockScopesStatements,
  stepReservationsStatement,
  readExistingReservations,
  writeGuardOutcome,
} from './guard-batch.sql';

describe('guard batch statements (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 4);
  let other: Client;
  beforeAll(async () => {
    await new EventPartitions(prisma).ensureAhead(new Date(), 1);
    other = new Client({ connectionString: TEST_DATABASE_URL });
    await other.connect();
  });
  afterAll(async () => {
    await other.end();
    await prisma.onModuleDestroy();
  });

  const reservation = (stepId: string, over: Partial<NewReservation> = {}): NewReservation =>
    newReservation(`rsv_${randomUUID().replace(/-/g, '')}`, { stepId, ...over });
  const reserved = (r: NewReservation): SystemEvent => ({
    type: 'BudgetReserved',
    eventId: systemEventId('reservation', r.id, 'reserved'),
    occurredAt: new Date(),
    reservationId: r.id,
    scopes: { resourceId: 'r1', traceId: 't1' },
    data: {
      stepId: r.stepId,
      scopeKeys: r.scopeKeys,
      estimatedCost: 0.0045,
      costUnit: 'USD',
      inputTokens: 1000,
      outputTokens: 200,
      inputTokensMargin: 1,
      expiresAt: r.expiresAt.toISOString(),
    },
  });

  it('the opening statements hold each scope until the transaction ends, across connections', async () => {
    const project = `p-${randomUUID()}`;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const locking = inTransaction(
      prisma.pool,
      () => held,
      5000,
      lockScopesStatements(project, ['resource:r1', 'user:u1']),
    );
    await new Promise((r) => setTimeout(r, 50));
    await other.query('BEGIN');
    await other.query('SET LOCAL lock_timeout = 100');
    await expect(
      other.query('SELECT pg_advisory_xact_lock($1::bigint)', [scopeLockId(project, 'user:u1').toString()]),
    ).rejects.toMatchObject({ code: '55P03' });
    await other.query('ROLLBACK');
    release();
    await locking;
    await other.query('BEGIN');
    await other.query('SELECT pg_advisory_xact_lock($1::bigint)', [scopeLockId(project, 'user:u1').toString()]);
    await other.query('ROLLBACK');
  });

  it('reads, after the locks are taken, the reservations a retried step already has (ids are literals, quoted safely)', async () => {
    const project = `p-${randomUUID()}`;
    const tricky = "step-'); DROP TABLE reservations; --";
    const r = reservation(tricky);
    await writeGuardOutcome(prisma.sql, project, [r], []);
    const [{ standard_conforming_strings }] = await prisma.sql.query<{ standard_conforming_strings: string }>(
      'SHOW standard_conforming_strings',
    );
    expect(standard_conforming_strings).toBe('on');
    const seen = await inTransaction(
      prisma.pool,
      async (_tx, opened) => existingByStep(opened[opened.length - 1]),
      5000,
      [...lockScopesStatements(project, ['resource:r1']), stepReservationsStatement(project, [tricky, 'other'])],
    );
    expect([...seen.keys()]).toEqual([tricky]);
    expect(seen.get(tricky)).toMatchObject({
      id: r.id,
      status: 'open',
      cost_micros: '4500',
      input_tokens: '1000',
      expires_at: r.expiresAt.toISOString(),
    });
    expect([...(await readExistingReservations(prisma, project, [tricky])).keys()]).toEqual([tricky]);
  });

  /**
   * Every reserving check looks its step's reservation up. The table's statistics are older than
   * the project's growth (a new project, autovacuum off or late): the lookup must still read the
   * step's own entry, not every reservation of the project, which grows with every check.
   */
  it("looks each step's reservation up by its step id, whatever the statistics say of the project", async () => {
    const one = new PrismaService(TEST_DATABASE_URL, 1);
    try {
      const project = `p-${randomUUID()}`;
      await one.pool.query('ANALYZE reservations');
      await one.pool.query(
        `INSERT INTO reservations (id, project_id, step_id, scope_keys, context_keys, cost_micros, cost_unit, input_tokens, output_tokens, created_at, expires_at)
         SELECT 'rsv-' || $1 || i, $1, 'step-' || i, ARRAY['resource:r1'], ARRAY['resource:r1'], 4500, 'USD', 1000, 200, now(), now() + interval '10 minutes'
           FROM generate_series(1, 3000) AS i`,
        [project],
      );
      const rowsRead = async () => {
        await one.pool.query('SELECT pg_stat_force_next_flush()');
        const { rows } = await one.pool.query(
          `SELECT (seq_tup_read + coalesce(idx_tup_fetch, 0))::int AS n FROM pg_stat_user_tables WHERE relname = 'reservations'`,
        );
        return rows[0].n as number;
      };
      for (let i = 0; i < 7; i++) {
        const before = await rowsRead();
        const seen = await one.transaction(
          // [off, locks, existing, on]
          async (_tx, opened) => existingByStep(opened[2]),
          5000,
          // One step (an agent's own check) and several (a group commit) take different texts.
          withIndexPlans([
            ...lockScopesStatements(project, ['resource:r1']),
            stepReservationsStatement(project, [`step-${17 + i}`, ...(i % 2 ? ['step-none'] : [])]),
          ]),
        );
        expect([...seen.keys()]).toEqual([`step-${17 + i}`]);
        expect((await readExistingReservations(one, project, ['step-18'])).get('step-18')?.status).toBe('open');
        expect((await rowsRead()) - before).toBeLessThan(10);
      }
    } finally {
      await one.onModuleDestroy();
    }
  });

  it('writeGuardOutcome stores reservations and their events; a step that already has one keeps it, and no second BudgetReserved is logged', async () => {
    const project = `p-${randomUUID()}`;
    const first = reservation('step-1');
    expect(await writeGuardOutcome(prisma.sql, project, [first], [reserved(first)])).toEqual(new Set([first.id]));
    const again = reservation('step-1');
    const decided: SystemEvent = {
      type: 'GuardDecided',
      eventId: systemEventId('decision', randomUUID()),
      occurredAt: new Date(),
      data: { decision: 'deny', violations: [], warnings: [], stepId: 'step-2' },
    };
    expect(await writeGuardOutcome(prisma.sql, project, [again], [reserved(again), decided])).toEqual(new Set());

    const rows = await prisma.sql.query<{
      id: string;
      scope_keys: string[];
      context_keys: string[];
      estimated_input_tokens: string;
    }>(
      'SELECT id, scope_keys, context_keys, estimated_input_tokens::text FROM reservations WHERE project_id = $1',
      project,
    );
    expect(rows).toEqual([
      {
        id: first.id,
        scope_keys: ['resource:r1'],
        context_keys: ['resource:r1', 'run:t1'],
        estimated_input_tokens: '1000',
      },
    ]);
    const events = await prisma.sql.query<{ type: string; event_id: string }>(
      'SELECT type, event_id FROM events WHERE project_id = $1 ORDER BY position',
      project,
    );
    expect(events.map((e) => e.type)).toEqual(['BudgetReserved', 'GuardDecided']);

    expect(await readExistingReservations(prisma, project, ['step-1', 'step-9'])).toEqual(
      new Map([['step-1', expect.objectContaining({ id: first.id, status: 'open', cost_micros: '4500' })]]),
    );
  });
});
