import { ownDatabase } from '../../../test/support/own-database';
import { migrationsDir } from './migrate';
import { PrismaService } from './prisma.service';
import { TableStatistics } from './statistics';

/**
 * A cached plan made on an empty table stays until the table's statistics change; with
 * autovacuum off (as on this machine) they never do, unless Tollgate takes them. Its own
 * database, so that its tables start empty and nothing else changes them.
 */
describe('table statistics (real PostgreSQL, generic plans as the pool makes them)', () => {
  const db = ownDatabase('statistics');
  let prisma: PrismaService;

  beforeAll(async () => {
    await db.create(migrationsDir());
    // One connection: the plan it caches is the one every lookup below runs on.
    prisma = new PrismaService(db.url, 1);
  }, 60_000);
  afterAll(async () => {
    await prisma?.onModuleDestroy();
    await db.drop();
  });

  /** Rows of `reservations` read by sequential and index scans, so far. */
  const rowsRead = async () => {
    await prisma.pool.query('SELECT pg_stat_force_next_flush()');
    const { rows } = await prisma.pool.query(
      `SELECT (seq_tup_read + coalesce(idx_tup_fetch, 0))::int AS n FROM pg_stat_user_tables WHERE relname = 'reservations'`,
    );
    return rows[0].n as number;
  };

  /** A lookup whose plan depends on the statistics: planned as if the project held nothing, it filters the project's whole range. */
  const lookUp = async (projectId: string, stepIds: string[]) =>
    new Set(
      (
        await prisma.sql.query<{ step_id: string }>(
          'SELECT step_id FROM reservations WHERE project_id = $1 AND step_id = ANY($2::text[])',
          projectId,
          stepIds,
        )
      ).map((r) => r.step_id),
    );

  it('takes the statistics of a table that grew, so a plan cached while it was empty is made again', async () => {
    await prisma.pool.query('VACUUM ANALYZE reservations');
    // Planned, and cached on the connection, while the table is empty.
    expect(await lookUp('p1', ['step-1'])).toEqual(new Set());
    await prisma.pool.query(
      `INSERT INTO reservations (id, project_id, step_id, scope_keys, context_keys, cost_micros, cost_unit, input_tokens, output_tokens, created_at, expires_at)
       SELECT 'rsv-' || i, 'p1', 'step-' || i, ARRAY['resource:r1'], ARRAY['resource:r1'], 4500, 'USD', 1000, 200, now(), now() + interval '10 minutes'
         FROM generate_series(1, 4000) AS i`,
    );
    const lookup = async () => {
      const before = await rowsRead();
      expect(await lookUp('p1', ['step-17'])).toEqual(new Set(['step-17']));
      return (await rowsRead()) - before;
    };
    // The plan made on the empty table reads every reservation of the project.
    expect(await lookup()).toBeGreaterThanOrEqual(4000);

    const statistics = new TableStatistics(prisma);
    const analyzed = await statistics.refresh();
    expect(analyzed).toContainEqual({ table: 'reservations', changedRows: 4000 });
    expect(await lookup()).toBeLessThan(10);

    // Nothing changed enough since: nothing is analyzed again.
    expect((await statistics.refresh()).map((a) => a.table)).not.toContain('reservations');
  });
});
