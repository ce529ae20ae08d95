import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Client } from 'pg';

/** Prisma Migrate's own lock id, so that `prisma migrate` and this runner never overlap. */
const PRISMA_MIGRATE_LOCK = 72707369;

export interface MigrationResult {
  applied: string[];
}

/** Creates the database named in `url` when it does not exist yet. */
export async function ensureDatabase(url: string): Promise<boolean> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount) return false;
    const quoted = '"' + name.replace(/"/g, '""') + '"';
    try {
      await client.query(`CREATE DATABASE ${quoted}`);
    } catch (err) {
      // Another process created it between our check and our CREATE.
      if ((err as { code?: string }).code !== '42P04') throw err;
      return false;
    }
    return true;
  } finally {
    await client.end();
  }
}

/**
 * Applies pending `prisma/migrations/<timestamp>_<name>/migration.sql` files in order and keeps
 * Prisma's `_prisma_migrations` bookkeeping (checksum = sha256 of the file), so `prisma migrate
 * status` agrees wherever Prisma's native engine exists. Each file runs in one transaction.
 */
export async function applyMigrations(url: string, dir: string): Promise<MigrationResult> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [PRISMA_MIGRATE_LOCK]);
    await client.query(`CREATE TABLE IF NOT EXISTS _prisma_migrations (
      id varchar(36) PRIMARY KEY, checksum varchar(64) NOT NULL, finished_at timestamptz,
      migration_name varchar(255) NOT NULL, logs text, rolled_back_at timestamptz,
      started_at timestamptz NOT NULL DEFAULT now(), applied_steps_count integer NOT NULL DEFAULT 0)`);
    const { rows } = await client.query<{
      migration_name: string;
      checksum: string;
      finished_at: Date | null;
      rolled_back_at: Date | null;
    }>('SELECT migration_name, checksum, finished_at, rolled_back_at FROM _prisma_migrations');
    const failed = rows.find((r) => !r.finished_at && !r.rolled_back_at);
    if (failed) {
      throw new Error(
        `Migration ${failed.migration_name} failed earlier; fix it and mark it rolled back before migrating again`,
      );
    }
    const done = new Map(rows.filter((r) => r.finished_at).map((r) => [r.migration_name, r.checksum]));
    const names = (await readdir(dir, { withFileTypes: true }))
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
      .sort();
    const applied: string[] = [];
    for (const name of names) {
      const sql = await readFile(join(dir, name, 'migration.sql'));
      const checksum = createHash('sha256').update(sql).digest('hex');
      const previous = done.get(name);
      if (previous !== undefined) {
        if (previous !== checksum) throw new Error(`Migration ${name} was changed after it was applied`);
        continue;
      }
      const id = randomUUID();
      await client.query('INSERT INTO _prisma_migrations (id, checksum, migration_name) VALUES ($1, $2, $3)', [
        id,
        checksum,
        name,
      ]);
      try {
        await client.query('BEGIN');
        await client.query(sql.toString('utf8'));
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        await client.query('UPDATE _prisma_migrations SET logs = $2 WHERE id = $1', [id, String(err)]);
        throw new Error(`Migration ${name} failed: ${(err as Error).message}`);
      }
      await client.query('UPDATE _prisma_migrations SET finished_at = now(), applied_steps_count = 1 WHERE id = $1', [
        id,
      ]);
      applied.push(name);
    }
    return { applied };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [PRISMA_MIGRATE_LOCK]).catch(() => undefined);
    await client.end();
  }
}

/** Where the migrations are, from source (ts-node/jest) or from dist/. */
export function migrationsDir(): string {
  return join(
    __dirname,
    '..',
    '..',
    '..',
    ...(__dirname.includes(`${join('dist', 'libs')}`) ? ['..'] : []),
    'prisma',
    'migrations',
  );
}
