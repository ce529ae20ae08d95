import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { applyMigrations, ensureDatabase, migrationsDir } from '@tollgate/database';
import { loadConfig, type AppConfig } from '@tollgate/platform';
import { bootFailed, createApiApp, whereThingsAre } from './api/src/bootstrap';
import { WorkerFeaturesModule } from './worker/src/worker.module';

/** One process for one machine: the API and the worker together, on one pool. */
async function main() {
  config = loadConfig();
  await ensureDatabase(config.DATABASE_URL);
  const { applied } = await applyMigrations(config.DATABASE_URL, migrationsDir());
  const app = await createApiApp(config, [WorkerFeaturesModule]);
  await app.listen(config.PORT, config.HOST);
  new Logger('tollgate').log({
    msg: 'tollgate started (API and worker)',
    ...whereThingsAre(config, app.getHttpServer().address() as { port: number }),
    migrationsApplied: applied,
  });
}

let config: AppConfig | undefined;
main().catch((err) => bootFailed(config, err));
