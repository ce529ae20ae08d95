import { Client } from 'pg';
import { applyMigrations, ensureDatabase } from '../../libs/database/src/migrate';
import { TEST_DATABASE_URL } from './env';

/**
 * A database of a spec's own beside the shared test database (named after it plus `suffix`), for
 * specs whose statistics, plans or migrations must not be shared with the others: `create` drops
 * what a past run left and migrates it with the migrations in `dir`; `drop` removes it.
 */
export function ownDatabase(suffix: string) {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `${url.pathname}_${suffix}`;
  const drop = async () => {
    const admin = new Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    try {
      await admin.query(`DROP DATABASE IF EXISTS "${url.pathname.slice(1)}" WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  };
  return {
    url: url.toString(),
    drop,
    async create(dir: string) {
      await drop();
      await ensureDatabase(url.toString());
      await applyMigrations(url.toString(), dir);
    },
  };
}
