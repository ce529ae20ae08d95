import 'reflect-metadata';
import { ensureDatabase, applyMigrations, migrationsDir } from '@tollgate/database';
import { loadConfig } from '@tollgate/platform';
import { createApiApp } from './bootstrap';

/** The HTTP API alone (scale it separately from the worker). */
async function main() {
  const config = loadConfig();
  await ensureDatabase(config.DATABASE_URL);
  await applyMigrations(config.DATABASE_URL, migrationsDir());
  const app = await createApiApp(config);
  await app.listen(config.PORT, config.HOST);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
