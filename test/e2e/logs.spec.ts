import { spawn, spawnSync, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, serviceNodeFlags } from '../../bench/support/harness';
import { TEST_ADMIN_TOKEN, TEST_DATABASE_URL } from '../support/env';
import { call, createProject } from '../support/http';

const ROOT = join(__dirname, '..', '..');
const SCRIPTS = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
  .scripts;
/** What `npm start` passes node before the entrypoint (package.json's config.serviceNodeFlags). */
const SERVICE_NODE_FLAGS = serviceNodeFlags();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;

/** A Redis of this test's own (on another port), so that it can be stopped and started again. */
async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  for (let i = 0; i < 100; i++) {
    if (
      spawnSync('redis-cli', ['-p', String(port), 'ping'])
        .stdout?.toString()
        .includes('PONG')
    )
      return child;
    await sleep(50);
  }
  throw new Error('redis-server did not start');
}

const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) =>
    child.exitCode !== null || child.signalCode !== null
      ? resolve()
      : (child.once('exit', () => resolve()), child.kill('SIGTERM')),
  );

interface Line {
  time: string;
  level: string;
  msg: string;
  context?: string;
  [field: string]: unknown;
}

(hasRedisServer ? describe : describe.skip)('the service log (`npm start`, built)', () => {
  let service: ChildProcess;
  let redis: ChildProcess;
  let redisPort: number;
  let url: string;
  let stdout = '';
  let stderr = '';
  const queuePrefix = `tollgate-logs-${randomBytes(4).toString('hex')}`;
  const lines = (): Line[] =>
    stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  const waitFor = async (pred: (l: Line) => boolean, ms = 20_000) => {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      const found = lines().find(pred);
      if (found) return found;
      await sleep(100);
    }
    throw new Error(`no such line within ${ms} ms; the log:\n${stdout}\n${stderr}`);
  };

  beforeAll(async () => {
    execFileSync(process.execPath, [join(ROOT, 'scripts/ensure-built.mjs'), '--quiet'], { cwd: ROOT, stdio: 'pipe' });
    redisPort = await freePort();
    redis = await startRedis(redisPort);
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const db = new URL(TEST_DATABASE_URL);
    // A password in the URL (ignored by trust authentication) must not reach the log.
    db.password = 'not-to-be-logged';
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: db.toString(),
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      PORT: String(port),
      HOST: '127.0.0.1',
      TOLLGATE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      QUEUE_PREFIX: queuePrefix,
      LOG_LEVEL: 'log',
      TOLLGATE_EXPORTER_ALLOW_HOSTS: '127.0.0.1',
    };
    // Without a secret key, saving a webhook exporter answers 501 not_configured.
    delete env.TOLLGATE_SECRET_KEY;
    service = spawn(process.execPath, [...SERVICE_NODE_FLAGS, join(ROOT, 'dist/apps/main.js')], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    service.stdout!.on('data', (d) => (stdout += String(d)));
    service.stderr!.on('data', (d) => (stderr += String(d)));
    await waitFor((l) => l.msg.startsWith('tollgate started'), 60_000);
  }, 300_000);

  afterAll(async () => {
    if (service) await stop(service);
    if (redis) await stop(redis);
  });

  it('starts with one line saying where things are, and no per-route lines', async () => {
    const started = lines().find((l) => l.msg.startsWith('tollgate started'))!;
    expect(started).toMatchObject({
      level: 'info',
      api: url,
      dashboard: `${url}/dashboard`,
      docs: `${url}/docs`,
      health: `${url}/health`,
      ready: `${url}/health/ready`,
      metrics: `${url}/metrics`,
      queuePrefix,
    });
    expect(started.database).toBe(TEST_DATABASE_URL.replace('postgresql://postgres@', 'postgresql://postgres:***@'));
    expect(stdout).not.toContain('not-to-be-logged');
    expect(stdout).not.toContain('Mapped {');
    expect(stdout).not.toContain('dependencies initialized');
  });

  it('leads / to the dashboard; /dashboard/ and /docs/ are the pages', async () => {
    const root = await fetch(`${url}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/dashboard');
    for (const page of ['/dashboard', '/dashboard/', '/docs', '/docs/']) {
      const r = await fetch(`${url}${page}`);
      expect([page, r.status, r.headers.get('content-type')]).toEqual([page, 200, 'text/html; charset=utf-8']);
    }
  });

  it("logs a client's mistake and a 501 not_configured as a request line, not an error with a stack", async () => {
    const p = await createProject(url);
    const before = lines().length;
    expect((await call(url, 'GET', '/v1/nothing-here')).status).toBe(404);
    expect((await call(url, 'POST', '/v1/events', { token: p.key, body: { events: [{}] } })).status).toBe(200);
    const webhook = await call(url, 'PUT', '/v1/exporters/hook', {
      token: p.key,
      body: { type: 'webhook', url: 'http://127.0.0.1:9/hook', signingSecret: 'webhook-secret-0123456789' },
    });
    expect(webhook.status).toBe(501);
    expect(webhook.body.code).toBe('not_configured');
    await waitFor((l) => l.msg === 'request' && l.status === 501);
    const after = lines().slice(before);
    expect(after.filter((l) => l.level === 'error' || l.level === 'fatal')).toEqual([]);
    expect(JSON.stringify(after)).not.toContain('"stack"');
    expect(after.find((l) => l.status === 404)).toMatchObject({
      level: 'info',
      context: 'http',
      method: 'GET',
      route: '/v1/nothing-here',
    });
  });

  it('a Redis outage is one warning when it goes and one line when it is back', async () => {
    await stop(redis);
    await waitFor((l) => l.msg.startsWith('redis unreachable'));
    await sleep(3000); // BullMQ's clients retry meanwhile, several times each
    redis = await startRedis(redisPort);
    await waitFor((l) => l.msg === 'redis is back', 30_000);
    const outage = lines().filter((l) => l.context === 'redis' || /redis|ECONNREFUSED/i.test(l.msg));
    expect(outage.map((l) => [l.level, l.msg.split(':')[0]])).toEqual([
      ['warn', 'redis unreachable'],
      ['info', 'redis is back'],
    ]);
    expect(outage[0].redis).toBe(`redis://127.0.0.1:${redisPort}`);
  }, 60_000);

  it('every line is JSON with an ISO time, a level and a string msg; nothing raw on stderr', () => {
    for (const raw of stdout.split('\n').filter(Boolean)) {
      const l = JSON.parse(raw) as Line;
      expect(typeof l.msg).toBe('string');
      expect(l.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(['fatal', 'error', 'warn', 'info', 'debug', 'trace']).toContain(l.level);
    }
    expect(stderr).toBe('');
  });

  it('logs the shutdown', async () => {
    const exited = new Promise<string>((resolve) =>
      service.once('exit', (code, signal) => resolve(`${code ?? ''}${signal ?? ''}`)),
    );
    service.kill('SIGTERM');
    // Nest re-raises the signal once it has closed everything.
    expect(['0', 'SIGTERM']).toContain(await exited);
    const tail = lines().slice(-2);
    expect(tail).toEqual([
      expect.objectContaining({
        level: 'info',
        context: 'shutdown',
        signal: 'SIGTERM',
        msg: expect.stringMatching(/^shutting down/),
      }),
      expect.objectContaining({ level: 'info', context: 'shutdown', signal: 'SIGTERM', msg: 'stopped' }),
    ]);
  });
});

describe('the start scripts', () => {
  it('run every entrypoint with the service Node.js flags, which this node accepts', () => {
    // The young generation sized for a guard's load (see README, "Running the parts"): without it, a
    // service under many agents spent twice the CPU in garbage collection.
    expect(SERVICE_NODE_FLAGS).toContain('--max-semi-space-size=64');
    for (const [script, entry] of [
      ['start', 'dist/apps/main.js'],
      ['start:api', 'dist/apps/api/src/main.js'],
      ['start:worker', 'dist/apps/worker/src/main.js'],
    ]) {
      expect(SCRIPTS[script]).toMatch(new RegExp(`&& node \\$npm_package_config_serviceNodeFlags ${entry}$`));
    }
    const run = spawnSync(process.execPath, [...SERVICE_NODE_FLAGS, '-e', 'process.exit(0)']);
    expect({ status: run.status, stderr: String(run.stderr) }).toEqual({ status: 0, stderr: '' });
  });
});
