import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { Client } from 'pg';

export const BENCH_ADMIN_TOKEN = 'bench-admin-token-0123456789';

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
}

export async function resetDatabase(url: string): Promise<void> {
  const u = new URL(url);
  const name = u.pathname.slice(1);
  u.pathname = '/postgres';
  const c = new Client({ connectionString: u.toString() });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await c.end();
}

export interface ServiceProcess {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * The Node.js flags the service runs with: package.json's `config.serviceNodeFlags`, which
 * `npm start` passes too, so that the benches measure the service as it is run.
 */
export function serviceNodeFlags(): string[] {
  // The repository's: the nearest package.json above this file (built to dist/ or dist-…/).
  let dir = __dirname;
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    config?: { serviceNodeFlags?: string };
  };
  return (pkg.config?.serviceNodeFlags ?? '').split(' ').filter(Boolean);
}

/**
 * A port no one listens on, from the system's ephemeral range (a port picked at random in
 * 4000–5999 was sometimes 4045, 4190, 5060 or 5061, which fetch() refuses to connect to).
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const ENTRIES = {
  main: ['apps', 'main.js'],
  api: ['apps', 'api', 'src', 'main.js'],
  /** The API with the guard's batching changed to a variant named by BENCH_GUARD_VARIANT. */
  'guard-variant': ['bench', 'guard', 'variant-service.js'],
  /** bench:guard's floor: each check one PostgreSQL transaction in a bare node:http server. */
  'guard-floor': ['bench', 'guard', 'floor.js'],
};

/** Starts the built service (dist/) as its own process, as a user would run it, and waits until it is ready. */
export async function startServiceProcess(
  entry: keyof typeof ENTRIES,
  env: Record<string, string>,
): Promise<ServiceProcess> {
  const port = await freePort();
  const script = join(__dirname, '..', '..', ...ENTRIES[entry]);
  const child = spawn(process.execPath, [...serviceNodeFlags(), script], {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      TOLLGATE_ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
      QUEUE_PREFIX: `bench-${randomUUID().slice(0, 8)}`,
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    try {
      const r = await fetch(`${url}/health/ready`);
      if (r.ok) break;
    } catch {
      /* not up yet */
    }
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export async function createBenchProject(
  url: string,
  scopes = ['ingest', 'guard', 'read', 'admin'],
): Promise<{ id: string; key: string }> {
  const headers = { authorization: `Bearer ${BENCH_ADMIN_TOKEN}`, 'content-type': 'application/json' };
  const p = (await (
    await fetch(`${url}/v1/admin/projects`, { method: 'POST', headers, body: JSON.stringify({ name: 'bench' }) })
  ).json()) as { id: string };
  const k = (await (
    await fetch(`${url}/v1/admin/projects/${p.id}/keys`, { method: 'POST', headers, body: JSON.stringify({ scopes }) })
  ).json()) as { key: string };
  return { id: p.id, key: k.key };
}
