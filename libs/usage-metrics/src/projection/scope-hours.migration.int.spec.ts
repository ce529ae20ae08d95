import { applyMigrations, migrationsDir } from '@tollgate/database';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { ownDatabase } from '../../../../test/support/own-database';
import { METRICS } from '../metric-names';
import { SCOPE_HOUR_COLUMNS } from './rollup-store.sql';

const MIGRATION = '20261201170000_scope_rollups_one_row_per_hour';

/**
 * The scoped cube moved from one row per metric to one row per (tuple, hour). A deployment that
 * upgrades keeps its history: the rows stored before the migration read the same after it,
 * through the view that kept the old table's name. Its own database, migrated up to just before
 * the change, filled the old way, then migrated to the end.
 */
describe('the scoped cube migration (real PostgreSQL)', () => {
  const own = ownDatabase('scope_hours');
  const before = mkdtempSync(join(tmpdir(), 'tollgate-migrations-'));
  let db: Client;

  beforeAll(async () => {
    for (const name of readdirSync(migrationsDir()).filter((n) => n < MIGRATION))
      cpSync(join(migrationsDir(), name), join(before, name), { recursive: true });
    await own.create(before);
    db = new Client({ connectionString: own.url });
    await db.connect();
  }, 60_000);
  afterAll(async () => {
    await db?.end();
    await own.drop();
    rmSync(before, { recursive: true, force: true });
  });

  it('reads every stored cell the same after the migration, and keeps one row per tuple and hour', async () => {
    // Two tuples, two hours; the input total (cost-bearing), the reasoning tokens and the duration.
    await db.query(
      `INSERT INTO metric_scope_rollups (project_id, dims_id, name, bucket_start, count, sum, min, max, cost_micros, cost_count)
       VALUES ('p', 1, 1, '2026-11-30T10:00:00Z', 3, 1234.5, 100, 900, 4500, 3),
              ('p', 1, 9, '2026-11-30T10:00:00Z', 2, 40, 15, 25, 0, 0),
              ('p', 1, 12, '2026-11-30T10:00:00Z', 3, 0.3, 0.1, 0.1, 0, 0),
              ('p', 1, 1, '2026-11-30T11:00:00Z', 1, 7, 7, 7, 0, 0),
              ('p', 2, 2, '2026-11-30T10:00:00Z', 5, 50, 1, 20, 123456789, 4),
              ('q', 1, 1, '2026-11-30T10:00:00Z', 1, 1, 1, 1, 1, 1)`,
    );
    const read = `SELECT project_id, dims_id::int, name::int, bucket_start, count::int, sum::text, min, max, cost_micros::text, cost_count::int
                    FROM metric_scope_rollups ORDER BY project_id, dims_id, bucket_start, name`;
    const stored = (await db.query(read)).rows;
    await applyMigrations(own.url, migrationsDir());
    expect((await db.query(read)).rows).toEqual(stored);
    const { rows } = await db.query(`SELECT count(*)::int AS n FROM metric_scope_hours`);
    expect(rows[0].n).toBe(4);
  });

  it('has the columns of every metric the projector writes', async () => {
    const { rows } = await db.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_name = 'metric_scope_hours'`,
    );
    const columns = new Set(rows.map((r) => r.column_name));
    expect(SCOPE_HOUR_COLUMNS.map((c) => c.column).filter((c) => !columns.has(c))).toEqual([]);
    expect(new Set(SCOPE_HOUR_COLUMNS.map((c) => c.metric))).toEqual(new Set(METRICS.map((m) => m.id)));
    // And the view shows each of them: a row with every metric reads back one record per metric.
    await db.query(
      `INSERT INTO metric_scope_hours (project_id, dims_id, bucket_start, ${SCOPE_HOUR_COLUMNS.map((c) => c.column).join(', ')})
       VALUES ('all', 1, '2026-11-30T10:00:00Z', ${SCOPE_HOUR_COLUMNS.map(() => '1').join(', ')})`,
    );
    const names = await db.query<{ name: number }>(
      `SELECT name::int FROM metric_scope_rollups WHERE project_id = 'all' ORDER BY name`,
    );
    expect(names.rows.map((r) => r.name)).toEqual(METRICS.map((m) => m.id));
  });
});
