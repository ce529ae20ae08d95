import { TollgateClient, type TollgateError } from '@tollgate/sdk';
import { execFileSync, execSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Client } from 'pg';
import { serviceNodeFlags } from '../../bench/support/harness';
import { TEST_ADMIN_TOKEN, TEST_DATABASE_URL, TEST_REDIS_URL } from '../support/env';
import { createProject, type TestProject } from '../support/http';

export const ROOT = join(__dirname, '..', '..');
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A built entrypoint (`dist/…/main.js`) as a child process, so a scenario can SIGKILL it and start it again. */
export class ServiceProcess {
  private child: ChildProcess | undefined;
  output = '';
  starts = 0;

  constructor(
    readonly kind: 'api' | 'worker',
    private readonly env: Record<string, string>,
    readonly port = 0,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  async start(waitReady = true): Promise<void> {
    const main = this.kind === 'api' ? 'dist/apps/api/src/main.js' : 'dist/apps/worker/src/main.js';
    const child = spawn(process.execPath, [...serviceNodeFlags(), join(ROOT, main)], {
      cwd: ROOT,
      env: {
        ...process.env,
        ...this.env,
        PORT: String(this.port),
        HOST: '127.0.0.1',
        LOG_LEVEL: process.env.FAULTS_LOG_LEVEL ?? 'error',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d) => (this.output = (this.output + String(d)).slice(-20_000)));
    child.stderr!.on('data', (d) => (this.output = (this.output + String(d)).slice(-20_000)));
    this.child = child;
    this.starts++;
    if (!waitReady) return;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (!this.running)
        throw new Error(`${this.kind} exited (${child.exitCode ?? child.signalCode}): ${this.output.slice(-2000)}`);
      if (this.kind === 'worker') {
        // The worker has no port: alive for a second after boot is "up".
        await sleep(1000);
        if (this.running) return;
        continue;
      }
      if (
        await fetch(`${this.url}/health/ready`).then(
          (r) => r.ok,
          () => false,
        )
      )
        return;
      await sleep(100);
    }
    throw new Error(`${this.kind} did not become ready: ${this.output.slice(-2000)}`);
  }

  /** SIGKILL: no drain, in-flight requests and jobs are cut. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
}

export function buildOnce(): void {
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'pipe' });
}

export function processEnv(queuePrefix: string): Record<string, string> {
  return {
    DATABASE_URL: TEST_DATABASE_URL,
    REDIS_URL: TEST_REDIS_URL,
    TOLLGATE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    QUEUE_PREFIX: queuePrefix,
    TOLLGATE_SECRET_KEY: FAULTS_SECRET_KEY,
    EXPORTS_TICK_MS: '200',
    EXPORTS_LOCK_MS: '5000',
    TOLLGATE_EXPORTER_ALLOW_HOSTS: '127.0.0.1',
  };
}

const FAULTS_SECRET_KEY = 'faults-secret-key-0123456789-0123456789';

export function newQueuePrefix(): string {
  return `tollgate-faults-${randomBytes(4).toString('hex')}`;
}

/** What the producers know: every id they recorded, and which of those they were told were refused or dropped. */
export interface LoadResult {
  project: TestProject;
  resourceId: string;
  recorded: Set<string>;
  notAcknowledged: Set<string>;
  /** accepted + duplicates, as the SDK counted the service's answers. */
  acknowledgedBySdk: number;
  duplicateAcks: number;
  retries: number;
  retryStatuses: Map<string, number>;
  guardChecks: number;
  guardFailOpen: number;
  /** Guard calls that threw (they should not: failMode decides when the service cannot answer). */
  guardErrors: number;
}

/**
 * A steady load: `producers` SDK clients recording step events (each `perTick` events every 100 ms)
 * and one loop of guard checks, until `stop()` is called; then every client is shut down (all
 * buffered events delivered or reported dropped).
 */
export class Load {
  private running = true;
  private loops: Promise<void>[] = [];
  private readonly clients: TollgateClient[] = [];
  readonly result: LoadResult;

  constructor(
    private readonly baseUrl: string,
    project: TestProject,
    private readonly producers = 4,
    private readonly perTick = 10,
  ) {
    this.result = {
      project,
      resourceId: `faults-${randomBytes(4).toString('hex')}`,
      recorded: new Set(),
      notAcknowledged: new Set(),
      acknowledgedBySdk: 0,
      duplicateAcks: 0,
      retries: 0,
      retryStatuses: new Map(),
      guardChecks: 0,
      guardFailOpen: 0,
      guardErrors: 0,
    };
  }

  static async start(baseUrl: string, producers = 4, perTick = 10): Promise<Load> {
    // admin: the scenario configures the project's exporter with the same key.
    const project = await createProject(baseUrl, ['ingest', 'guard', 'read', 'admin']);
    const load = new Load(baseUrl, project, producers, perTick);
    load.begin();
    return load;
  }

  private client(): TollgateClient {
    const r = this.result;
    const onRetry = (err: TollgateError) => {
      r.retries++;
      const key = err.status ? String(err.status) : err.code;
      r.retryStatuses.set(key, (r.retryStatuses.get(key) ?? 0) + 1);
    };
    const c = new TollgateClient({
      baseUrl: this.baseUrl,
      apiKey: r.project.key,
      flushIntervalMs: 200,
      maxBatchSize: 200,
      timeoutMs: 5000,
      retries: 100,
      maxRetryDelayMs: 1000,
      maxBufferSize: 100_000,
      guard: { timeoutMs: 3000, retries: 0 },
      onRetry,
      onDrop: (d) => d.events.forEach((e) => r.notAcknowledged.add(e.eventId)),
      onRejected: (x) => r.notAcknowledged.add(x.eventId ?? ''),
    });
    this.clients.push(c);
    return c;
  }

  private begin(): void {
    const r = this.result;
    for (let p = 0; p < this.producers; p++) {
      const c = this.client();
      this.loops.push(
        (async () => {
          let step = 0;
          while (this.running) {
            for (let i = 0; i < this.perTick; i++) {
              const id = c.events.record({
                traceId: `faults-p${p}`,
                runId: `faults-p${p}-${Math.floor(step / 100)}`,
                resourceId: r.resourceId,
                entityType: 'agent',
                entityName: 'faults-agent',
                provider: 'openai',
                model: 'gpt-4o-mini',
                stepIndex: step++,
                usage: { inputTokens: 100 + (step % 37), outputTokens: 10 + (step % 11) },
              });
              r.recorded.add(id);
            }
            await sleep(100);
          }
        })(),
      );
    }
    const guard = this.client();
    this.loops.push(
      (async () => {
        while (this.running) {
          r.guardChecks++;
          try {
            const res = await guard.guard.check({
              context: { resourceId: r.resourceId },
              limits: [{ scope: 'resource', window: '24h', maxTotalTokens: 1e12 }],
              failMode: 'open',
            });
            if (res.reason) r.guardFailOpen++;
          } catch {
            r.guardErrors++;
          }
          await sleep(50);
        }
      })(),
    );
  }

  /** Events the producers were told were stored (accepted or duplicate) so far. */
  get acknowledgedSoFar(): number {
    return this.clients.reduce((n, c) => n + c.events.stats.accepted + c.events.stats.duplicates, 0);
  }

  async stop(): Promise<LoadResult> {
    this.running = false;
    await Promise.all(this.loops);
    await Promise.all(this.clients.map((c) => c.shutdown({ timeoutMs: 90_000 })));
    for (const c of this.clients) {
      this.result.acknowledgedBySdk += c.events.stats.accepted + c.events.stats.duplicates;
      this.result.duplicateAcks += c.events.stats.duplicates;
    }
    return this.result;
  }
}

export async function pg<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: TEST_DATABASE_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

// --- The shared PostgreSQL and Redis of this machine -------------------------------------------

const PG_VERSION = () => execSync('ls /etc/postgresql').toString().trim().split('\n')[0];

export function postgres(action: 'stop' | 'start'): void {
  execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', PG_VERSION(), 'main', action], { stdio: 'pipe' });
}

export function postgresUp(): boolean {
  try {
    execFileSync('pg_isready', ['-h', '127.0.0.1', '-p', '5432', '-q']);
    return true;
  } catch {
    return false;
  }
}

/** Starts PostgreSQL when it is down and waits for it; safe to call in any finally block. */
export async function ensurePostgres(): Promise<void> {
  if (!postgresUp()) {
    try {
      postgres('start');
    } catch {
      /* already starting */
    }
  }
  for (let i = 0; i < 60 && !postgresUp(); i++) await sleep(500);
}

export function redisUp(): boolean {
  try {
    return execFileSync('redis-cli', ['-p', '6379', 'ping'], { stdio: 'pipe' }).toString().trim() === 'PONG';
  } catch {
    return false;
  }
}

export function redisStop(): void {
  try {
    execFileSync('redis-cli', ['-p', '6379', 'shutdown', 'nosave'], { stdio: 'pipe' });
  } catch {
    /* the connection closes as Redis exits */
  }
}

/** Starts Redis when it is down and waits for it; safe to call in any finally block. */
export async function ensureRedis(): Promise<void> {
  if (!redisUp()) {
    try {
      execFileSync(
        'redis-server',
        ['--daemonize', 'yes', '--bind', '127.0.0.1', '--port', '6379', '--save', '', '--appendonly', 'no'],
        { stdio: 'pipe' },
      );
    } catch {
      /* already starting */
    }
  }
  for (let i = 0; i < 60 && !redisUp(); i++) await sleep(250);
}
