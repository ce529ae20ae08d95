import { Client } from 'pg';
import { applyMigrations, ensureDatabase, migrationsDir } from '../../libs/database/src/migrate';
import { TEST_DATABASE_URL } from './env';

/** A fresh test database with the real migrations, once per jest run. */
export default async function globalSetup(): Promise<void> {
  const url = new URL(TEST_DATABASE_URL);
  const name = url.pathname.slice(1);
  url.pathname = '/postgres';
  const admin = new Client({ connectionString: url.toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await admin.end();
  await ensureDatabase(TEST_DATABASE_URL);
  await applyMigrations(TEST_DATABASE_URL, migrationsDir());
}
