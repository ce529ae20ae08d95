import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { call, createProject, stepEvent } from '../support/http';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from '../support/env';
import { startService, type RunningService } from '../support/service';
import { acceptedEventIds, eventually, SECRET_KEY, startReceiver, webhookExporter, type Receiver } from './support';

const ROOT = join(__dirname, '..', '..');
const WORKER = join(ROOT, 'dist', 'apps', 'worker', 'src', 'main.js');

/**
 * The worker as deployed: the built `node dist/apps/worker/src/main.js`, in its own process, so
 * the test can SIGKILL it in the middle of a batch.
 */
describe('a worker killed in the middle of a batch', () => {
  const prefix = `tollgate-test-crash-${randomBytes(4).toString('hex')}`;
  let svc: RunningService;
  let sink: Receiver;
  let worker: ChildProcess | undefined;
  const workerLog: string[] = [];

  const startWorker = () => {
    const child = spawn(process.execPath, [WORKER], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: TEST_DATABASE_URL,
        REDIS_URL: TEST_REDIS_URL,
        QUEUE_PREFIX: prefix,
        TOLLGATE_SECRET_KEY: SECRET_KEY,
        EXPORTS_TICK_MS: '100',
        // A killed worker's batch is taken over once its lock lapses: keep that short here.
        EXPORTS_LOCK_MS: '1500',
        // The receiver is on 127.0.0.1.
        TOLLGATE_EXPORTER_ALLOW_HOSTS: '127.0.0.1',
        LOG_LEVEL: 'error',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d) => workerLog.push(String(d)));
    child.stderr!.on('data', (d) => workerLog.push(String(d)));
    return child;
  };
  const exited = (child: ChildProcess) =>
    new Promise<void>((resolve) =>
      child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve()),
    );

  beforeAll(async () => {
    // The child runs the build of the code under test.
    execSync('npx tsc -p tsconfig.build.json && npx tsc-alias -p tsconfig.build.json', {
      cwd: ROOT,
      stdio: 'pipe',
      timeout: 180_000,
    });
    svc = await startService({ QUEUE_PREFIX: prefix, TOLLGATE_SECRET_KEY: SECRET_KEY });
  }, 200_000);
  afterAll(async () => {
    if (worker && worker.exitCode === null) {
      worker.kill('SIGKILL');
      await exited(worker);
    }
    await sink?.close();
    await svc?.close();
  });

  it('ends with every event at the receiver, and the checkpoint never passed an undelivered event', async () => {
    let killedBatch: string | undefined;
    sink = await startReceiver(async (n, req) => {
      if (n !== 2) return 200;
      // The third request: the worker dies while the receiver holds it.
      killedBatch = req.json.batchId;
      worker!.kill('SIGKILL');
      await exited(worker!);
      return 599;
    });
    const project = await createProject(svc.url);
    await call(svc.url, 'PUT', '/v1/exporters/crashy', {
      token: project.key,
      body: webhookExporter(sink.url, { batch: { maxEvents: 10, maxWaitMs: 20 } }),
    });
    const exporterId = (
      await svc.prisma.exporter.findUniqueOrThrow({
        where: { projectId_name: { projectId: project.id, name: 'crashy' } },
      })
    ).id;
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const events = Array.from({ length: 25 }, () => stepEvent());
      expect((await call(svc.url, 'POST', '/v1/events', { token: project.key, body: { events } })).body.accepted).toBe(
        25,
      );
      ids.push(...events.map((e) => e.eventId));
    }

    // Watches the invariant all along: every event at or before the checkpoint was acknowledged.
    const violations: string[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const [cp] = await svc.prisma.$queryRawUnsafe<{ tx: string; position: bigint }[]>(
          'SELECT checkpoint_tx AS tx, checkpoint_position AS position FROM exporters WHERE id = $1',
          exporterId,
        );
        const covered = await svc.prisma.$queryRawUnsafe<{ event_id: string }[]>(
          'SELECT event_id FROM events WHERE project_id = $1 AND (tx, position) <= ($2::xid8, $3::bigint)',
          project.id,
          cp.tx,
          cp.position,
        );
        const acked = new Set(acceptedEventIds(sink));
        const missing = covered.filter((r) => !acked.has(r.event_id));
        if (missing.length)
          violations.push(`checkpoint ${cp.tx}/${cp.position} passed ${missing.length} unacknowledged events`);
        await new Promise((r) => setTimeout(r, 25));
      }
    })();

    worker = startWorker();
    await eventually(
      () => killedBatch !== undefined && worker!.signalCode === 'SIGKILL',
      'the worker killed mid-batch',
      30_000,
    );
    const deliveredBeforeCrash = acceptedEventIds(sink).length;
    expect(deliveredBeforeCrash).toBe(20);

    worker = startWorker();
    await eventually(() => new Set(acceptedEventIds(sink)).size === 100, 'every event after the restart', 40_000).catch(
      (err) => {
        throw new Error(`${(err as Error).message}\nworker output:\n${workerLog.join('')}`);
      },
    );
    await eventually(
      async () => (await svc.prisma.exporter.findUniqueOrThrow({ where: { id: exporterId } })).inFlightBatch === null,
      'nothing in flight',
    );
    watching = false;
    await watcher;

    expect(violations).toEqual([]);
    expect(acceptedEventIds(sink).sort()).toEqual([...ids].sort());
    // The interrupted batch was re-sent whole, under the same idempotency key; nothing else twice.
    const resent = sink.requests.filter((r) => r.json.batchId === killedBatch);
    expect(resent.map((r) => r.status)).toEqual([599, 200]);
    expect(acceptedEventIds(sink)).toHaveLength(100);
    const [cp] = await svc.prisma.$queryRawUnsafe<{ tx: string; position: bigint }[]>(
      'SELECT checkpoint_tx AS tx, checkpoint_position AS position FROM exporters WHERE id = $1',
      exporterId,
    );
    const [last] = await svc.prisma.$queryRawUnsafe<{ tx: string; position: bigint }[]>(
      'SELECT tx::text AS tx, position FROM events WHERE project_id = $1 ORDER BY tx DESC, position DESC LIMIT 1',
      project.id,
    );
    expect({ tx: cp.tx, position: String(cp.position) }).toEqual({ tx: last.tx, position: String(last.position) });
  }, 90_000);
});
