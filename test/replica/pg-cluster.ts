import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';

/**
 * Throwaway PostgreSQL servers for the replica test: a primary made with initdb and a streaming
 * replica made from it with pg_basebackup -R, each on its own loopback port and data directory
 * under one temporary directory. The machine's PostgreSQL (5432) is never touched. Run as the
 * `postgres` OS user (initdb refuses root).
 */
export function pgBinDir(): string {
  const versions = readdirSync('/usr/lib/postgresql')
    .filter((v) => existsSync(`/usr/lib/postgresql/${v}/bin/initdb`))
    .sort((a, b) => Number(b) - Number(a));
  if (!versions.length) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql/*/bin');
  return `/usr/lib/postgresql/${versions[0]}/bin`;
}

const asRoot = userInfo().uid === 0;

/** Runs a PostgreSQL binary as the postgres user; throws with its output when it fails. */
function pg(bin: string, args: string[], timeoutMs = 60_000): string {
  const cmd = join(pgBinDir(), bin);
  const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
  const r = spawnSync(file, argv, { encoding: 'utf8', timeout: timeoutMs, cwd: '/tmp' });
  if (r.status !== 0)
    throw new Error(`${bin} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stdout}${r.stderr}`);
  return r.stdout;
}

export interface PgServer {
  dir: string;
  port: number;
  url(db?: string): string;
  start(): void;
  /** `fast` for a clean stop, `immediate` to kill it. */
  stop(mode?: 'fast' | 'immediate'): void;
  running(): boolean;
}

function server(dir: string, port: number, socketDir: string): PgServer {
  const log = join(socketDir, `pg-${port}.log`);
  return {
    dir,
    port,
    url: (db = 'postgres') => `postgresql://postgres@127.0.0.1:${port}/${db}`,
    start: () =>
      void pg('pg_ctl', ['-D', dir, '-l', log, '-w', '-t', '60', '-o', `-p ${port} -k ${socketDir}`, 'start']),
    stop: (mode = 'fast') => {
      if (existsSync(join(dir, 'postmaster.pid'))) pg('pg_ctl', ['-D', dir, '-m', mode, '-w', '-t', '60', 'stop']);
    },
    running: () => existsSync(join(dir, 'postmaster.pid')),
  };
}

export interface ReplicaPair {
  root: string;
  primary: PgServer;
  replica: PgServer;
  /** Creates the replica from the primary (pg_basebackup -R) and starts it. */
  makeReplica(): Promise<void>;
  /** Stops both servers and removes every data directory. */
  destroy(): void;
}

export function portFree(port: number): boolean {
  // pg_isready exits 2 when nothing answers on the port.
  return spawnSync(join(pgBinDir(), 'pg_isready'), ['-h', '127.0.0.1', '-p', String(port), '-t', '1']).status === 2;
}

export async function makePrimary(primaryPort: number, replicaPort: number): Promise<ReplicaPair> {
  for (const port of [primaryPort, replicaPort])
    if (!portFree(port)) throw new Error(`port ${port} is in use: the replica test needs it free`);
  const root = mkdtempSync('/tmp/tollgate-replica-');
  if (asRoot) execFileSync('chown', ['postgres:postgres', root]);
  const primaryDir = join(root, 'primary');
  const replicaDir = join(root, 'replica');
  pg('initdb', ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  // Streaming needs wal senders and a replication line (initdb --auth=trust writes one for 127.0.0.1).
  appendFileSync(
    join(primaryDir, 'postgresql.conf'),
    [
      "listen_addresses = '127.0.0.1'",
      'wal_level = replica',
      'max_wal_senders = 4',
      'hot_standby = on',
      'fsync = off',
      'shared_buffers = 32MB',
      'max_connections = 60',
      'wal_keep_size = 256MB',
      // The replica answers queries that conflict with replay instead of cancelling them at once.
      'max_standby_streaming_delay = 30s',
      "timezone = 'UTC'",
    ].join('\n') + '\n',
  );
  const primary = server(primaryDir, primaryPort, root);
  const replica = server(replicaDir, replicaPort, root);
  primary.start();
  return {
    root,
    primary,
    replica,
    async makeReplica() {
      pg(
        'pg_basebackup',
        [
          '-h',
          '127.0.0.1',
          '-p',
          String(primaryPort),
          '-U',
          'postgres',
          '-D',
          replicaDir,
          '-R',
          '-X',
          'stream',
          '-c',
          'fast',
          '--no-sync',
        ],
        120_000,
      );
      replica.start();
      await waitFor(
        async () => (await one<{ r: boolean }>(replica.url(), 'SELECT pg_is_in_recovery() AS r'))?.r === true,
        'the replica in recovery',
        30_000,
      );
    },
    destroy() {
      for (const s of [replica, primary]) {
        try {
          s.stop('immediate');
        } catch {
          /* already gone */
        }
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The first row of one statement on its own connection (null when the server cannot be reached). */
export async function one<T>(url: string, sql: string, params: unknown[] = []): Promise<T | null> {
  const c = new Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    return ((await c.query(sql, params)).rows[0] as T) ?? null;
  } catch {
    return null;
  } finally {
    await c.end().catch(() => undefined);
  }
}

export async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Waits until the replica has replayed everything the primary had in its WAL when called (written or not). */
export async function replayed(pair: ReplicaPair, timeoutMs = 20_000): Promise<void> {
  // The insert location, not the write location (pg_current_wal_lsn): a commit made with
  // synchronous_commit off (the projector's) may not be written yet, and waiting for the write
  // location then returns before the replica has it (test:replica failed once so: the replica's
  // tail still held the event the projector had just committed past).
  const lsn = (await one<{ lsn: string }>(pair.primary.url(), 'SELECT pg_current_wal_insert_lsn()::text AS lsn'))!.lsn;
  await waitFor(
    async () =>
      (await one<{ ok: boolean }>(pair.replica.url(), `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok`, [lsn]))
        ?.ok === true,
    `the replica to replay up to ${lsn}`,
    timeoutMs,
  );
}
