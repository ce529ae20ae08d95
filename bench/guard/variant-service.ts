import 'reflect-metadata';
import { applyMigrations, ensureDatabase, migrationsDir } from '@tollgate/database';
import { GuardTuning } from '@tollgate/ledger';
import { loadConfig } from '@tollgate/platform';
import { createApiApp } from '../../apps/api/src/bootstrap';

/**
 * The API as `start:api` runs it, with the guard's batching changed to a variant the bench
 * compares the product against — built here, so that the product has no setting for it.
 * BENCH_GUARD_VARIANT: `two-trips` (every reserving check read, then written: no usage decided
 * on from this process's last commits) or `no-group-commit` (each check its own transaction).
 */
async function main() {
  const config = loadConfig();
  await ensureDatabase(config.DATABASE_URL);
  await applyMigrations(config.DATABASE_URL, migrationsDir());
  const app = await createApiApp(config);
  const tuning = app.get(GuardTuning);
  const variant = process.env.BENCH_GUARD_VARIANT;
  if (variant === 'two-trips') tuning.oneTrip = false;
  else if (variant === 'no-group-commit') tuning.maxBatch = 1;
  else throw new Error(`BENCH_GUARD_VARIANT must be two-trips or no-group-commit, not ${variant}`);
  await app.listen(config.PORT, config.HOST);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
