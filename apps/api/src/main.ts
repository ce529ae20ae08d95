import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { ensureDatabase, applyMigrations, migrationsDir } from '@tollgate/database';
import { loadConfig, type AppConfig } from '@tollgate/platform';
import { bootFailed, createApiApp, whereThingsAre } from './bootstrap';

/** The HTTP API alone (scale it separately from the worker). */
async function main() {
  config = loadConfig();
  await ensureDatabase(config.DATABASE_URL);
  const { applied } = await applyMigrations(config.DATABASE_URL, migrationsDir());
  const app = await createApiApp(config);
  await app.listen(config.PORT, config.HOST);
  new Logger('tollgate').log({
    msg: 'tollgate API started',
    ...whereThingsAre(config, app.getHttpServer().address() as { port: number }),
    migrationsApplied: applied,
  });
}

let config: AppConfig | undefined;
main().catch((err) => bootFailed(config, err));
