import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Client } from 'pg';
import { TEST_ADMIN_TOKEN, TEST_DATABASE_URL, TEST_REDIS_URL } from '../support/env';

export const ROOT = join(__dirname, '..', '..');

/** A port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Builds the service once per jest worker (`npm run build`: about 10 s). */
let built = false;
export function buildService(): void {
  if (built) return;
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'pipe' });
  built = true;
}

/**
 * The built API (`node dist/apps/api/src/main.js`) as a child process on a fixed port, so a test
 * can kill it and start it again at the same address.
 */
export class ApiProcess {
  private child: ChildProcess | undefined;
  private stderr = '';
  readonly url: string;
  private readonly queuePrefix = `tollgate-sdk-test-${randomBytes(4).toString('hex')}`;

  constructor(readonly port: number) {
    this.url = `http://127.0.0.1:${port}`;
  }

  async start(): Promise<void> {
    this.stderr = '';
    const child = spawn(process.execPath, [join(ROOT, 'dist/apps/api/src/main.js')], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: TEST_DATABASE_URL,
        REDIS_URL: TEST_REDIS_URL,
        PORT: String(this.port),
        HOST: '127.0.0.1',
        TOLLGATE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
        QUEUE_PREFIX: this.queuePrefix,
        LOG_LEVEL: 'error',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.on('data', (d) => (this.stderr += String(d)));
    this.child = child;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`API exited with ${child.exitCode}: ${this.stderr}`);
      const ok = await fetch(`${this.url}/health/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      await sleep(100);
    }
    throw new Error(`API did not become ready on ${this.url}: ${this.stderr}`);
  }

  /** Kills the process at once (no graceful drain): in-flight requests are cut. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
}

/** Rows of one project in the test database. */
export async function countEvents(projectId: string, where = 'TRUE', params: unknown[] = []): Promise<number> {
  const pg = new Client({ connectionString: TEST_DATABASE_URL });
  await pg.connect();
  try {
    const res = await pg.query(`SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND ${where}`, [
      projectId,
      ...params,
    ]);
    return res.rows[0].n;
  } finally {
    await pg.end();
  }
}

export async function eventRows(projectId: string): Promise<any[]> {
  const pg = new Client({ connectionString: TEST_DATABASE_URL });
  await pg.connect();
  try {
    const res = await pg.query(
      `SELECT event_id, trace_id, run_id, thread_id, resource_id, entity_type, entity_name, provider, model, input_tokens::int, output_tokens::int,
              cache_read_tokens::int, reasoning_tokens::int, step_index, finish_reason, reservation_id
         FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded' ORDER BY step_index NULLS LAST, position`,
      [projectId],
    );
    return res.rows;
  } finally {
    await pg.end();
  }
}

/** Fails with a clear message when a route another issue adds is not on this service yet. */
export async function requireRoute(
  base: string,
  method: string,
  path: string,
  token: string,
  waitsFor: string,
): Promise<void> {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: method === 'GET' ? undefined : '{}',
  });
  if (res.status === 404) {
    throw new Error(
      `${method} ${path} is not on this service yet (404): this test waits for the ${waitsFor} merge. It is expected to fail until then, and must pass after it.`,
    );
  }
}
