import { migrationsDir } from '@tollgate/database';
import { loadConfig, redactUrl, redisOptions, type AppConfig } from '@tollgate/platform';
import IORedis from 'ioredis';
import { readdirSync } from 'node:fs';
import { Client } from 'pg';

export interface Check {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  /** What to do, when not ok. */
  fix?: string;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    p,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`${what} did not answer within ${ms / 1000} s`)), ms).unref(),
    ),
  ]);
}

async function postgres(config: AppConfig): Promise<Check[]> {
  const where = redactUrl(config.DATABASE_URL);
  const client = new Client({ connectionString: config.DATABASE_URL, connectionTimeoutMillis: 3000 });
  try {
    await withTimeout(client.connect(), 4000, 'PostgreSQL');
  } catch (err) {
    const e = err as { code?: string; message: string };
    await client.end().catch(() => undefined);
    if (e.code === '3D000') {
      return [
        { name: 'postgres', status: 'ok', detail: `${where}: server answers` },
        {
          name: 'migrations',
          status: 'fail',
          detail: 'the database does not exist yet',
          fix: '`npm start` or `npm run migrate` creates it and applies the migrations',
        },
      ];
    }
    return [
      {
        name: 'postgres',
        status: 'fail',
        detail: `${where}: ${e.message}`,
        fix: 'start PostgreSQL 15+ (e.g. `docker compose up -d postgres`) or set DATABASE_URL',
      },
    ];
  }
  try {
    const { rows } = await client.query<{ v: string }>("SELECT current_setting('server_version') AS v");
    const major = Number(rows[0].v.split('.')[0]);
    const checks: Check[] = [
      major >= 15
        ? { name: 'postgres', status: 'ok', detail: `${where}: PostgreSQL ${rows[0].v}` }
        : {
            name: 'postgres',
            status: 'fail',
            detail: `${where}: PostgreSQL ${rows[0].v}`,
            fix: 'Tollgate needs PostgreSQL 15 or later',
          },
    ];
    const files = readdirSync(migrationsDir(), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
      .sort();
    const table = await client.query<{ t: string | null }>(`SELECT to_regclass('_prisma_migrations')::text AS t`);
    const applied = table.rows[0].t
      ? new Set(
          (
            await client.query<{ migration_name: string }>(
              'SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
            )
          ).rows.map((r) => r.migration_name),
        )
      : new Set<string>();
    const pending = files.filter((f) => !applied.has(f));
    checks.push(
      pending.length
        ? {
            name: 'migrations',
            status: 'fail',
            detail: `${pending.length} of ${files.length} pending (${pending.slice(0, 3).join(', ')}${pending.length > 3 ? ', …' : ''})`,
            fix: '`npm run migrate` (or `npm start`) applies them',
          }
        : { name: 'migrations', status: 'ok', detail: `all ${files.length} applied` },
    );
    return checks;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function redis(config: AppConfig): Promise<Check> {
  const where = redactUrl(config.REDIS_URL);
  const client = new IORedis({
    ...redisOptions(config),
    maxRetriesPerRequest: 0,
    enableOfflineQueue: true,
    lazyConnect: true,
    retryStrategy: () => null,
    connectTimeout: 2000,
  });
  let lastError = '';
  client.on('error', (err: Error) => (lastError = err.message));
  try {
    await withTimeout(client.connect(), 3000, 'Redis');
    const info = await withTimeout(client.info('server'), 2000, 'Redis');
    const version = /redis_version:([^\r\n]+)/.exec(info)?.[1] ?? '?';
    return Number(version.split('.')[0]) >= 6
      ? { name: 'redis', status: 'ok', detail: `${where}: Redis ${version}` }
      : { name: 'redis', status: 'fail', detail: `${where}: Redis ${version}`, fix: 'Tollgate needs Redis 6 or later' };
  } catch (err) {
    return {
      name: 'redis',
      status: 'fail',
      detail: `${where}: ${lastError || (err as Error).message}`,
      fix: 'start Redis 6+ (e.g. `docker compose up -d redis`) or set REDIS_URL; without it queues (exporters, projections) wait, usage is still recorded',
    };
  } finally {
    client.disconnect();
  }
}

function secrets(config: AppConfig): Check[] {
  return [
    config.TOLLGATE_SECRET_KEY
      ? {
          name: 'secret key',
          status: 'ok',
          detail: 'TOLLGATE_SECRET_KEY is set (exporter secrets are stored encrypted)',
        }
      : {
          name: 'secret key',
          status: 'warn',
          detail:
            'TOLLGATE_SECRET_KEY is not set: saving an exporter with a secret (every webhook) answers 501 not_configured',
          fix: 'set TOLLGATE_SECRET_KEY to 32+ random characters, e.g. `openssl rand -hex 32`, and keep it: it decrypts the stored secrets',
        },
    config.TOLLGATE_ADMIN_TOKEN
      ? { name: 'admin token', status: 'ok', detail: 'TOLLGATE_ADMIN_TOKEN is set (the /v1/admin routes are on)' }
      : {
          name: 'admin token',
          status: 'warn',
          detail: 'TOLLGATE_ADMIN_TOKEN is not set: the /v1/admin routes (projects, keys) are off; the CLI still works',
          fix: 'set TOLLGATE_ADMIN_TOKEN to 16+ characters',
        },
  ];
}

/** `doctor`: is everything Tollgate needs there? Reads only; creates and applies nothing. */
export async function doctor(env: NodeJS.ProcessEnv = process.env): Promise<Check[]> {
  let config: AppConfig;
  try {
    config = loadConfig(env);
  } catch (err) {
    return [
      {
        name: 'config',
        status: 'fail',
        detail: (err as Error).message,
        fix: 'fix the variables named (see the Configuration table in README.md)',
      },
    ];
  }
  const [pg, r] = await Promise.all([postgres(config), redis(config)]);
  return [{ name: 'config', status: 'ok', detail: 'every variable is valid' }, ...pg, r, ...secrets(config)];
}

export function doctorText(checks: Check[]): string {
  const mark = { ok: 'ok  ', warn: 'warn', fail: 'FAIL' };
  return checks
    .map(
      (c) =>
        `${mark[c.status]}  ${c.name.padEnd(11)} ${c.detail.replace(/\s*\n\s*/g, '; ')}${c.fix ? `\n      ${''.padEnd(11)} → ${c.fix}` : ''}`,
    )
    .join('\n');
}
