import 'reflect-metadata';
import { applyMigrations, ensureDatabase, migrationsDir } from '@tollgate/database';
import { loadConfig } from '@tollgate/platform';
import { createApiApp } from './api/src/bootstrap';
import { WorkerFeaturesModule } from './worker/src/worker.module';

/** One process for one machine: the API and the worker together, on one pool. */
async function main() {
  const config = loadConfig();
  await ensureDatabase(config.DATABASE_URL);
  const { applied } = await applyMigrations(config.DATABASE_URL, migrationsDir());
  const app = await createApiApp(config, [WorkerFeaturesModule]);
  await app.listen(config.PORT, config.HOST);
  process.stdout.write(JSON.stringify({ level: 'log', msg: 'tollgate started', port: config.PORT, migrationsApplied: applied }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
