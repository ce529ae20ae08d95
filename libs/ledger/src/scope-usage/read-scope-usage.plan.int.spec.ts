import { EventPartitions, INDEX_PLANS, migrationsDir, PrismaService, withIndexPlans } from '@tollgate/database';
import type { StepUsageEvent } from '@tollgate/contracts';
import { ownDatabase } from '../../../../test/support/own-database';
import { insertStepEvents } from '../append-events/insert-step-events.sql';
import { priceStep } from '../pricing/price-step';
import { closeReservations } from '../reservations/release-reservation.sql';
import { newReservation } from '../budgets/new-reservation.fixture';
import { ReapedUntil } from '../check-guard/batching/reaped-until';
import { guardOutcomeStatement, lockScopesStatements } from '../check-guard/sql/guard-batch.sql';
import { guardRead, readScopeUsage, usageRead } from './read-scope-usage.sql';

/**
 * The guard reads the log's raw edges of a window on every check. The events the guard itself
 * writes (a BudgetReserved and a GuardDecided per reserving check) pile up in the current hour of
 * the hot scope: a read that scans them slows every check down as traffic goes on. Its own
 * database, so that its statistics are those of one hot resource, as in a bench or a busy agent.
 */
describe('the guard usage read (real PostgreSQL, generic plans as the pool makes them)', () => {
  const db = ownDatabase('plan');
  let prisma: PrismaService;

  beforeAll(async () => {
    await db.create(migrationsDir());
    prisma = new PrismaService(db.url, 2);
    await new EventPartitions(prisma).ensureAhead(new Date(), 1);
  }, 60_000);
  afterAll(async () => {
    await prisma.onModuleDestroy();
    await db.drop();
  });

  it('touches only the steps it counts, however many guard events the hot scope has in the hour', async () => {
    await prisma.pool.query(
      `SELECT ensure_event_partition(d) FROM generate_series(now() - interval '366 days', now(), interval '1 month') AS d`,
    );
    // A year of steps of one resource, analysed; then a burst of guard traffic on it this hour.
    await prisma.pool.query(
      `INSERT INTO events (project_id, event_id, type, occurred_at, resource_id, input_tokens, output_tokens, cost_micros, cost_unit)
       SELECT 'p1', 'step-' || i, 'StepUsageRecorded', now() - (i * interval '1 second') * 1500, 'r1', 1000, 100, 3000, 'USD'
         FROM generate_series(1, 20000) AS i`,
    );
    await prisma.pool.query('ANALYZE events');
    await prisma.pool.query(
      `INSERT INTO events (project_id, event_id, type, occurred_at, resource_id, data)
       SELECT 'p1', 'guard-' || i, CASE WHEN i % 2 = 0 THEN 'BudgetReserved' ELSE 'GuardDecided' END, now() - (i % 600) * interval '1 second', 'r1', '{}'::jsonb
         FROM generate_series(1, 20000) AS i`,
    );

    const plans: unknown[] = [];
    const explaining = {
      query: async (text: string, ...params: unknown[]) => {
        const { rows } = await prisma.pool.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params);
        plans.push(rows[0]['QUERY PLAN']);
        return [];
      },
    };
    await readScopeUsage(explaining as never, 'p1', [{ scope: 'resource', scopeId: 'r1', window: '365d' }], new Date());

    const removed = (node: any): number =>
      (String(node['Relation Name'] ?? '').startsWith('events')
        ? (node['Rows Removed by Filter'] ?? 0) * (node['Actual Loops'] ?? 1)
        : 0) + (node.Plans ?? []).reduce((n: number, child: unknown) => n + removed(child), 0);
    expect(plans).toHaveLength(1);
    // The edges hold ~3 steps; the 20,000 guard events of the hour are never read.
    expect(removed((plans[0] as any)[0].Plan)).toBeLessThan(100);
    // Other resources' steps this hour, after the statistics were taken (autovacuum off, or a
    // project that grew since): the hot scope's read still walks its own index only.
    await prisma.pool.query(
      `INSERT INTO events (project_id, event_id, type, occurred_at, resource_id, input_tokens, output_tokens, cost_micros, cost_unit)
       SELECT 'p1', 'other-' || i, 'StepUsageRecorded', now() - (i % 600) * interval '1 second', 'r' || (2 + i % 50), 1000, 100, 3000, 'USD'
         FROM generate_series(1, 20000) AS i`,
    );
    plans.length = 0;
    await readScopeUsage(explaining as never, 'p1', [{ scope: 'resource', scopeId: 'r1', window: '365d' }], new Date());
    expect(removed((plans[0] as any)[0].Plan)).toBeLessThan(100);

    // A hot scope's own steps this hour are counted, not walked: ingest keeps the hour's counter
    // in the same statement (20,000 steps since the hour began, as real ingest writes them).
    const hourStart = Math.floor(Date.now() / 3600_000) * 3600_000;
    for (let b = 0; b < 20; b++) {
      await insertStepEvents(
        prisma.sql,
        'p1',
        Array.from({ length: 1000 }, (_, k) => {
          const event: StepUsageEvent = {
            eventId: `hot-${b}-${k}`,
            occurredAt: new Date(hourStart + ((b * 1000 + k) % 60) * 1000).toISOString(),
            traceId: 'trace-hot',
            entityType: 'agent',
            resourceId: 'r-hot',
            provider: 'openai',
            model: 'gpt-4o',
            usage: { inputTokens: 1000, outputTokens: 100 },
          };
          return {
            event,
            occurredAt: new Date(event.occurredAt),
            cost: priceStep(event, new Date(event.occurredAt), []),
          };
        }),
      );
    }
    const rowsRead = (node: any): number =>
      (/^events_\d{4}_\d{2}$/.test(String(node['Relation Name'] ?? ''))
        ? (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 1)
        : 0) + (node.Plans ?? []).reduce((n: number, child: unknown) => n + rowsRead(child), 0);
    plans.length = 0;
    await readScopeUsage(
      explaining as never,
      'p1',
      [{ scope: 'resource', scopeId: 'r-hot', window: '24h' }],
      new Date(),
    );
    expect(rowsRead((plans[0] as any)[0].Plan)).toBeLessThan(100);
    // And the numbers are the log's: gpt-4o, $2.50 in and $10 out per million tokens.
    const hot = await readScopeUsage(
      prisma.sql,
      'p1',
      [{ scope: 'resource', scopeId: 'r-hot', window: '1h' }],
      new Date(),
    );
    expect([...hot.values()][0]).toMatchObject({
      inputTokens: 20_000_000,
      outputTokens: 2_000_000,
      costByUnit: { USD: 20_000 * 3500 },
    });

    // The plan starts with the partitions its edges lie in, not the year's: each raw branch's
    // bounds are scalars, pruned before the plan runs (a cached plan locks and opens every
    // partition it keeps, on every execution). The current hour may reach into next month's.
    const partitionScans = (node: any): number =>
      (/^events_\d{4}_\d{2}$/.test(String(node['Relation Name'] ?? '')) ? 1 : 0) +
      (node.Plans ?? []).reduce((n: number, child: unknown) => n + partitionScans(child), 0);
    const months = Number(
      (await prisma.pool.query(`SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass`)).rows[0].count,
    );
    expect(months).toBeGreaterThan(12);
    plans.length = 0;
    await readScopeUsage(
      explaining as never,
      'p1',
      [
        { scope: 'resource', scopeId: 'r1', window: '365d' },
        { scope: 'resource', scopeId: 'r1', window: '1h', holds: false },
        { scope: 'user', scopeId: 'u1', window: '30d' },
      ],
      new Date(),
    );
    // resource: its two window starts' partial hours; user: its one (the current hour is counted, never read raw).
    expect(partitionScans((plans[0] as any)[0].Plan)).toBeLessThanOrEqual(2 + 1);

    // Pruned when it runs, but planned, and locked on every run, for every month of the log: a
    // connection makes that plan again after each statistics pass on a table it reads (~80 ms
    // with 14 months). Each edge names the partition that holds it instead.
    const partitions = new EventPartitions(prisma);
    await partitions.list();
    const now = new Date();
    const requests = [
      { scope: 'resource', scopeId: 'r1', window: '365d' },
      { scope: 'resource', scopeId: 'r1', window: '24h' },
    ] as const;
    // A step inside each window's partial first hour, where only the log can count it.
    await prisma.pool.query(
      `INSERT INTO events (project_id, event_id, type, occurred_at, resource_id, input_tokens, output_tokens, cost_micros, cost_unit)
       SELECT 'p1', 'edge-' || w, 'StepUsageRecorded', $1::timestamptz - w + interval '1 second', 'r1', 7, 1, 30, 'USD'
         FROM unnest(ARRAY[interval '365 days', interval '24 hours']) AS w`,
      [now],
    );
    const monthOf = (at: number) => `events_${new Date(at).toISOString().slice(0, 7).replace('-', '_')}`;
    const edgeMonths = [...new Set([monthOf(now.getTime() - 365 * 86_400_000), monthOf(now.getTime() - 86_400_000)])];
    /** Runs the read on a named statement (a generic plan, as the guard's): its usage, and the months it locked. */
    const run = async (name: string, partitionOf?: (from: number, to: number) => string | undefined) => {
      const read = usageRead('p1', requests, now, undefined, partitionOf);
      const client = await prisma.pool.connect();
      try {
        await client.query('BEGIN');
        const { rows } = await client.query({ name, text: read.statement.text, values: [...read.statement.params] });
        const locked = await client.query<{ name: string }>(
          `SELECT DISTINCT relation::regclass::text AS name FROM pg_locks
            WHERE pid = pg_backend_pid() AND relation::regclass::text ~ '^events_\\d{4}_\\d{2}$' ORDER BY 1`,
        );
        return { usage: read.usage(rows), months: locked.rows.map((r) => r.name) };
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    };
    const log = await run('read-the-log');
    const leaves = await run('read-the-leaves', (from, to) => partitions.partitionOf(from, to));
    expect(log.months).toHaveLength(months);
    expect(leaves.months).toEqual(edgeMonths.sort());
    expect(leaves.usage).toEqual(log.usage);
    expect([...leaves.usage.values()].map((u) => u.inputTokens % 1000)).toEqual([7, 7]);
  }, 60_000);

  /**
   * A connection plans the read once and keeps the plan. Planned while a table is nearly empty
   * (a fresh deployment, a new month's partition, the open reservations of a quiet hour), a
   * sequential scan looks cheapest; it must not stay the plan once the table has grown, or every
   * check walks every open reservation of the project (autovacuum, which would re-plan it, may
   * be off or late); nor may it look the steps' reservations up by another index than theirs.
   */
  it('plans the read with its indexes even when planned on an empty table, in both check paths', async () => {
    const one = new PrismaService(db.url, 1);
    try {
      await one.pool.query('DELETE FROM reservation_holds');
      await one.pool.query('DELETE FROM reservation_hold_totals');
      await one.pool.query('DELETE FROM reservations');
      await one.pool.query('VACUUM ANALYZE reservation_holds, reservation_hold_totals, reservations');
      const now = new Date();
      const requests = [{ scope: 'resource' as const, scopeId: 'quiet', window: '24h' as const }];
      // A reserving check reads in its transaction's opening, after its locks (see
      // CheckGuardHandler.commit).
      const inTransaction = async () => {
        const read = usageRead('p1', requests, now);
        return one.transaction(
          async (_tx, opened) => read.usage(opened[2]),
          5_000,
          withIndexPlans([...lockScopesStatements('p1', ['resource:quiet']), read.statement]),
        );
      };
      // A reserving check's outcome takes its scopes' expired holds out: its plan is made with
      // its indexes too, though planned on empty tables.
      let reservations = 0;
      const reserve = () =>
        one.transaction(async (tx) => {
          const outcome = guardOutcomeStatement(
            'p1',
            [newReservation(`rsv-plan-${++reservations}`, { scopeKeys: ['resource:busy-0'] })],
            [],
            { scopeKeys: ['resource:busy-0'], expiredBy: now },
          );
          return tx.commitWith(outcome!, [INDEX_PLANS]);
        }, 5_000);
      // The first checks on this connection plan it while there is no open reservation.
      await guardRead(one, 'p1', requests, now);
      await inTransaction();
      await reserve();
      await one.pool.query(
        `INSERT INTO reservation_holds (project_id, scope_key, expires_at, reservation_id, cost_micros, cost_unit, input_tokens, output_tokens)
         SELECT 'p1', 'resource:busy-' || (i % 500), now() + interval '10 minutes', 'rsv-' || i, 4500, 'USD', 1000, 200
           FROM generate_series(1, 20000) AS i`,
      );
      // The totals of what the bulk insert holds, with the reservation made above.
      await one.pool.query('DELETE FROM reservation_hold_totals');
      await one.pool.query(
        `INSERT INTO reservation_hold_totals (project_id, scope_key, cost_unit, holds, cost_micros, input_tokens, output_tokens)
         SELECT project_id, scope_key, cost_unit, count(*), sum(cost_micros), sum(input_tokens), sum(output_tokens)
           FROM reservation_holds GROUP BY project_id, scope_key, cost_unit`,
      );
      await one.pool.query(
        `INSERT INTO reservations (id, project_id, step_id, scope_keys, context_keys, cost_micros, cost_unit, input_tokens, output_tokens,
                                   estimated_input_tokens, provider, model, created_at, expires_at)
         SELECT 'rsv-' || i, 'p1', 'step-' || i, ARRAY['resource:busy-' || (i % 500)], ARRAY['resource:busy-' || (i % 500)], 4500, 'USD',
                1000, 200, 1000, 'openai', 'gpt-4o', now(), now() + interval '10 minutes'
           FROM generate_series(1, 4000) AS i`,
      );
      // Sequential scans, and rows read through an index: the step's own reservation is looked up
      // by its step id, not found among every reservation of the project.
      const scans = async () => {
        await one.pool.query('SELECT pg_stat_force_next_flush()');
        const { rows } = await one.pool.query(
          `SELECT sum(seq_scan)::int AS seq, sum(idx_tup_fetch)::int AS read FROM pg_stat_user_tables WHERE relname IN ('reservation_holds', 'reservation_hold_totals', 'reservations')`,
        );
        return rows[0] as { seq: number; read: number };
      };
      const before = await scans();
      for (let i = 0; i < 5; i++) {
        for (const usage of [await guardRead(one, 'p1', requests, now), await inTransaction()])
          expect([...usage.values()][0].reservedInputTokens).toBe(0);
        expect(await reserve()).toHaveLength(1);
      }
      const after = await scans();
      expect(after.seq).toBe(before.seq);
      expect(after.read - before.read).toBeLessThan(100);

      // Taking out the scope's expired holds walks that scope's expired holds only, not the
      // project's other holds (in the index's pages, which rows read above do not count).
      const holdPages = async () => {
        await one.pool.query('SELECT pg_stat_force_next_flush()');
        const { rows } = await one.pool.query(
          `SELECT (idx_blks_hit + idx_blks_read)::int AS n FROM pg_statio_user_indexes WHERE indexrelname = 'reservation_holds_pkey'`,
        );
        return rows[0].n as number;
      };
      let pagesBefore = await holdPages();
      for (let i = 0; i < 5; i++) await reserve();
      expect((await holdPages()) - pagesBefore).toBeLessThan(5 * 12);
      // So do a step that settles its reservation and a release: each takes out its own holds.
      pagesBefore = await holdPages();
      for (let i = 1; i <= 5; i++) {
        const event: StepUsageEvent = {
          eventId: `settles-${i}`,
          occurredAt: now.toISOString(),
          traceId: 't1',
          entityType: 'agent',
          resourceId: 'busy-0',
          reservationId: `rsv-plan-${i}`,
          provider: 'openai',
          model: 'gpt-4o',
          usage: { inputTokens: 1000, outputTokens: 100 },
        };
        await insertStepEvents(one.sql, 'p1', [{ event, occurredAt: now, cost: priceStep(event, now, []) }]);
        expect(await closeReservations(one.sql, { projectId: 'p1', id: `rsv-plan-${i + 5}` }, 'released')).toHaveLength(
          1,
        );
      }
      expect((await holdPages()) - pagesBefore).toBeLessThan(10 * 12);
      const { rows: left } = await one.pool.query(
        `SELECT count(*)::int AS n FROM reservation_holds WHERE reservation_id LIKE 'rsv-plan-%'`,
      );
      expect(left).toEqual([{ n: reservations - 10 }]);
    } finally {
      await one.onModuleDestroy();
    }
  }, 60_000);

  /**
   * A busy scope's holds expire by the thousand and its next reservation takes them out. With
   * autovacuum off (as on this machine) their index entries stay: a plan that visits each of them
   * on every check (a bitmap scan never marks an entry dead) slows every later check of the
   * scope. Planned once the table's statistics say the scope holds many.
   */
  it('walks a scope’s taken-out holds at most once, with autovacuum off', async () => {
    await prisma.pool.query(
      `INSERT INTO reservation_holds (project_id, scope_key, expires_at, reservation_id, cost_micros, cost_unit, input_tokens, output_tokens)
       SELECT 'p1', 'resource:churn', now() - interval '1 minute' - i * interval '1 millisecond', 'rsv-churn-' || i, 4500, 'USD', 1000, 200
         FROM generate_series(1, 30000) AS i`,
    );
    await prisma.pool.query(
      `INSERT INTO reservation_hold_totals (project_id, scope_key, cost_unit, holds, cost_micros, input_tokens, output_tokens)
       VALUES ('p1', 'resource:churn', 'USD', 30000, 30000 * 4500, 30000 * 1000, 30000 * 200)`,
    );
    await prisma.pool.query('ANALYZE reservation_holds');
    // A connection that plans the outcome now, as a long-running service's does.
    const one = new PrismaService(db.url, 1);
    try {
      // As a reserving check runs it (CheckGuardHandler.commit): locks, the read, the outcome.
      const reaped = new ReapedUntil();
      const keys = ['resource:churn'];
      let n = 0;
      const reserve = async () => {
        const at = new Date();
        const until = (k: string) => reaped.of('p1', k);
        const read = usageRead('p1', [{ scope: 'resource', scopeId: 'churn', window: '24h' }], at, until);
        const usage = await one.transaction(
          async (tx, opened) => {
            const outcome = guardOutcomeStatement(
              'p1',
              [newReservation(`rsv-churn-new-${++n}`, { scopeKeys: keys })],
              [],
              { scopeKeys: keys, expiredBy: at, after: keys.map(until) },
            );
            await tx.commitWith(outcome!, [INDEX_PLANS]);
            reaped.reaped('p1', keys, at.getTime());
            return read.usage(opened[opened.length - 2]);
          },
          5_000,
          withIndexPlans([...lockScopesStatements('p1', keys), read.statement]),
        );
        // What the scope holds before this check's own reservation: the earlier checks' only.
        expect([...usage.values()][0].reservedInputTokens).toBe(1000 * (n - 1));
      };
      const holdPages = async () => {
        await one.pool.query('SELECT pg_stat_force_next_flush()');
        const { rows } = await one.pool.query(
          `SELECT (heap_blks_hit + heap_blks_read + idx_blks_hit + idx_blks_read)::int AS n FROM pg_statio_user_tables WHERE relname = 'reservation_holds'`,
        );
        return rows[0].n as number;
      };
      // The first reads the 30,000 expired holds and takes them out; the next may step over their entries once.
      await reserve();
      await reserve();
      const before = await holdPages();
      for (let i = 0; i < 5; i++) await reserve();
      expect((await holdPages()) - before).toBeLessThan(5 * 20);
      const { rows } = await one.pool.query(
        `SELECT holds::int FROM reservation_hold_totals WHERE project_id = 'p1' AND scope_key = 'resource:churn'`,
      );
      expect(rows).toEqual([{ holds: 7 }]);
    } finally {
      await one.onModuleDestroy();
    }
  }, 60_000);
});
