import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { Client } from 'pg';
import { freePort, resetDatabase, startServiceProcess, type ServiceProcess } from '../support/harness';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every child this process started, so that an exit of any kind (a failure, Ctrl-C) kills them. */
const children = new Set<ChildProcess>();
let exitHookInstalled = false;

function track(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });
}

async function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** SIGTERM first (the service drains), SIGKILL when it takes longer than `graceMs`. */
async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  if (!(await waitExit(child, graceMs))) {
    child.kill('SIGKILL');
    await waitExit(child, 5000);
  }
}

function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(500, () => done(false));
    s.once('error', () => done(false));
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => done(String(d).startsWith('+PONG')));
  });
}

interface Slot {
  entry: 'main' | 'api';
  process?: ServiceProcess;
}

/**
 * The services under test, sharing one database: slot 0 runs `main` (the API and the worker:
 * sweeper, projector), the others `api`. Redis is the simulator's own redis-server on a free
 * loopback port when the machine has one (so restarting it disturbs nobody else), else REDIS_URL.
 */
export class Cluster {
  private readonly slots: Slot[];
  private redis?: { port: number; child?: ChildProcess };
  private pg?: Client;
  readonly queuePrefix = `sim-${randomBytes(4).toString('hex')}`;

  constructor(
    readonly databaseUrl: string,
    services: number,
    private readonly serviceEnv: Record<string, string>,
  ) {
    this.slots = Array.from({ length: services }, (_, i) => ({ entry: i === 0 ? 'main' : 'api' }));
  }

  get size(): number {
    return this.slots.length;
  }

  get ownRedis(): boolean {
    return this.redis !== undefined;
  }

  get redisUrl(): string {
    return this.redis ? `redis://127.0.0.1:${this.redis.port}` : (process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  }

  env(): Record<string, string> {
    return {
      ...this.serviceEnv,
      DATABASE_URL: this.databaseUrl,
      REDIS_URL: this.redisUrl,
      QUEUE_PREFIX: this.queuePrefix,
    };
  }

  /** The service's current address, or undefined while it is down (a restart picks a new port). */
  url(i: number): string | undefined {
    return this.slots[i].process?.url;
  }

  async start(): Promise<void> {
    await resetDatabase(this.databaseUrl);
    await this.startRedis();
    // main first: it creates the database and applies the migrations the others then find done.
    for (let i = 0; i < this.slots.length; i++) await this.startService(i);
    this.pg = new Client({ connectionString: this.databaseUrl, application_name: 'tollgate-sim' });
    await this.pg.connect();
  }

  /** The simulator's own connection: never one the faults cut. */
  get sql(): Client {
    if (!this.pg) throw new Error('cluster not started');
    return this.pg;
  }

  async startService(i: number): Promise<void> {
    const slot = this.slots[i];
    const started = await startServiceProcess(slot.entry, this.env());
    track(started.child);
    slot.process = started;
  }

  /** SIGKILL: nothing drained, in-flight requests and jobs cut. */
  async kill(i: number): Promise<void> {
    const p = this.slots[i].process;
    this.slots[i].process = undefined;
    if (!p) return;
    p.child.kill('SIGKILL');
    await waitExit(p.child, 10_000);
  }

  /** Cuts the services' PostgreSQL connections (all, or only those inside a statement or transaction). */
  async cutConnections(onlyBusy: boolean): Promise<number> {
    const { rows } = await this.sql.query<{ n: number }>(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'tollgate' AND pid <> pg_backend_pid()
          AND (NOT $1::bool OR state <> 'idle')`,
      [onlyBusy],
    );
    return rows[0].n;
  }

  private async startRedis(): Promise<void> {
    if (!this.redis) {
      const port = await freePort();
      const child = await this.spawnRedis(port);
      if (!child) return;
      this.redis = { port, child };
    } else {
      this.redis.child = await this.spawnRedis(this.redis.port);
    }
  }

  private async spawnRedis(port: number): Promise<ChildProcess | undefined> {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    const child = spawn('redis-server', args, { stdio: 'ignore' });
    const missing = await new Promise<boolean>((resolve) => {
      child.once('error', () => resolve(true));
      child.once('spawn', () => resolve(false));
    });
    if (missing) return undefined;
    track(child);
    for (let i = 0; i < 100 && !(await redisPing(port)); i++) await sleep(50);
    return child;
  }

  /** A Redis restart without its data (no persistence): the queues and schedules are gone. */
  async restartRedis(downMs: number): Promise<boolean> {
    const r = this.redis;
    if (!r?.child) return false;
    r.child.kill('SIGKILL');
    await waitExit(r.child, 5000);
    r.child = undefined;
    await sleep(downMs);
    r.child = await this.spawnRedis(r.port);
    return true;
  }

  /** Stops everything it started; safe to call more than once and after a partial start. */
  async stop(): Promise<void> {
    await this.pg?.end().catch(() => undefined);
    this.pg = undefined;
    await Promise.all(
      this.slots.map(async (s) => {
        const p = s.process;
        s.process = undefined;
        if (p) await stopChild(p.child, 15_000);
      }),
    );
    if (this.redis?.child) await stopChild(this.redis.child, 5000);
  }
}
