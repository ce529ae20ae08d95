import 'reflect-metadata';
import { applyMigrations, ensureDatabase, migrationsDir } from '@tollgate/database';
import { loadConfig } from '@tollgate/platform';
import { createWorkerApp } from './bootstrap';

/** The worker alone (scale it separately from the API). */
async function main() {
  const config = loadConfig();
  await ensureDatabase(config.DATABASE_URL);
  await applyMigrations(config.DATABASE_URL, migrationsDir());
  await createWorkerApp(config);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
