import { getQueueToken } from '@nestjs/bullmq';
import { RedisClient } from '@tollgate/platform';
import type { Queue } from 'bullmq';
import { randomBytes } from 'node:crypto';
import { Cluster } from 'ioredis';
import { startReceiver, startServiceWithWorker, webhookExporter, type Receiver } from '../exporters/support';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { startRedisCluster, until, type RedisClusterHandle } from './redis-cluster';

/**
 * BullMQ on a real Redis Cluster (README "Running at scale"): six redis-server processes on
 * 127.0.0.1:7001-7006 (three masters, three replicas), the API and the worker in this process with
 * REDIS_CLUSTER_NODES and a hash-tagged QUEUE_PREFIX. The projector (woken through BullMQ) and a
 * webhook exporter work; then the master that holds the queues' slot is killed: its replica takes
 * over, the queues go on, the receiver gets every event, and an event arrives twice only when its
 * batch was re-sent (same batch id). The rate limiter counts on the cluster before and after.
 */
describe('BullMQ and the rate limiter on a Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  let svc: RunningService;
  let limited: RunningService;
  let receiver: Receiver;
  let p: TestProject;
  const tag = `tollgate-cluster-${randomBytes(4).toString('hex')}`;
  const ingested: string[] = [];

  beforeAll(async () => {
    cluster = await startRedisCluster(7001);
    const redis = { REDIS_URL: 'redis://127.0.0.1:7001', REDIS_CLUSTER_NODES: cluster.nodes, QUEUE_PREFIX: `{${tag}}` };
    svc = await startServiceWithWorker({ ...redis, EXPORTS_TICK_MS: '200', EXPORTS_LOCK_MS: '3000' });
    // A second API on the same cluster with a small per-key limit (exact: no permit leases below a burst of 20).
    limited = await startService({ ...redis, RATE_LIMIT_PER_KEY_PER_SECOND: '0.5', RATE_LIMIT_BURST: '5' });
    receiver = await startReceiver();
    p = await createProject(svc.url);
    const put = await call(svc.url, 'PUT', '/v1/exporters/hook', {
      token: p.key,
      body: webhookExporter(receiver.url, { batch: { maxEvents: 10, maxWaitMs: 50 } }),
    });
    expect(put.status).toBe(200);
  }, 120_000);

  afterAll(async () => {
    // The cluster goes whatever happens to the rest: a close that hangs must not leave six redis-servers behind.
    const closed = (async () => {
      await limited?.close();
      await svc?.close();
      await receiver?.close();
    })();
    await Promise.race([closed, new Promise((r) => setTimeout(r, 40_000).unref())]).finally(() => cluster?.destroy());
  }, 60_000);

  const ingest = async (n: number, label: string) => {
    const events = Array.from({ length: n }, () =>
      stepEvent({ resourceId: 'r-cluster', entityName: label, usage: { inputTokens: 10, outputTokens: 1 } }),
    );
    const res = await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events } });
    expect([res.status, res.body.accepted]).toEqual([200, n]);
    ingested.push(...events.map((e) => e.eventId as string));
  };
  const received = () =>
    receiver.requests
      .filter((r) => r.status >= 200 && r.status < 300)
      .flatMap((r) =>
        (r.json?.events ?? []).map((e: { eventId: string }) => ({ id: e.eventId, batch: r.json.batchId as string })),
      );
  const projectedLag = async () =>
    (
      await call(svc.url, 'POST', '/api/observability/metrics/aggregate', {
        token: p.key,
        body: { name: ['mastra_model_total_input_tokens'], aggregation: 'sum' },
      })
    ).body;
  const deliveredAll = () =>
    until(
      () => new Set(received().map((r) => r.id)).size === ingested.length,
      `the receiver to get all ${ingested.length} events`,
      60_000,
    ).catch(withState);
  /** What the queues and the exporter's state say when something did not arrive: for the failure message. */
  const queueState = async () => {
    const got = new Set(received().map((r) => r.id));
    const missing = ingested.filter((id) => !got.has(id));
    const json = (v: unknown) => JSON.stringify(v, (_, x: unknown) => (typeof x === 'bigint' ? String(x) : x));
    const exporter = await svc.prisma.$queryRawUnsafe<unknown[]>(
      `SELECT status, checkpoint_tx, checkpoint_position, in_flight_batch, consecutive_failures, paused_reason FROM exporters WHERE project_id = $1`,
      p.id,
    );
    const batches = await svc.prisma.$queryRawUnsafe<unknown[]>(
      `SELECT b.id, b.status, b.attempts, b.job_id, b.last_error FROM export_batches b
         JOIN exporters e ON e.id = b.exporter_id WHERE e.project_id = $1`,
      p.id,
    );
    const master = cluster.masterOf(Number(cluster.cli(cluster.masterOf(0), 'cluster', 'keyslot', tag)));
    const queues = await Promise.all(
      ['exports', 'projections'].map(async (name) => {
        const queue = svc.app.get<Queue>(getQueueToken(name));
        const jobs = await queue.getJobs(['active', 'waiting', 'delayed', 'prioritized', 'failed']);
        const states = await Promise.all(jobs.map(async (j) => `${j.id} ${j.name} ${await j.getState()}`));
        const schedulers = (await queue.getJobSchedulers()).map((s) => `${s.key} due ${s.next}`);
        const dedup = cluster
          .cli(master, 'keys', `{${tag}}:${name}:de:*`)
          .split('\n')
          .filter(Boolean)
          .map((k) => `${k}=${cluster.cli(master, 'get', k)}`);
        return `${name}: jobs ${states.join('; ') || 'none'}; schedulers ${schedulers.join('; ') || 'none'}; deduplication ${dedup.join('; ') || 'none'}`;
      }),
    );
    return [
      `now ${Date.now()}; missing at the receiver ${missing.length}: ${missing.join(' ')}`,
      `exporter: ${json(exporter)}; batches: ${json(batches)}`,
      ...queues,
      `projector: ${json(await projectedLag())}`,
      `receiver: ${receiver.requests.length} requests, statuses ${receiver.requests.map((r) => r.status).join(',')}`,
    ].join('\n');
  };
  const withState = async (err: Error) => {
    throw new Error(`${err.message}\n${await queueState()}`);
  };
  const projectedAll = () =>
    until(async () => (await projectedLag()).lag.events === 0, 'the projector to reach the log', 60_000).catch(
      withState,
    );
  const rateLimited = async () => {
    const k = await createProject(limited.url);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++)
      statuses.push((await call(limited.url, 'GET', '/v1/policies', { token: k.key })).status);
    return statuses;
  };

  it('connects with ioredis Cluster, and BullMQ keeps the queues under the hash tag', async () => {
    expect(svc.app.get(RedisClient).redis).toBeInstanceOf(Cluster);
    const slot = Number(cluster.cli(7001, 'cluster', 'keyslot', tag));
    const master = cluster.masterOf(slot);
    await until(
      () => Number(cluster.cli(master, 'cluster', 'countkeysinslot', String(slot))) > 0,
      "queue keys in the tag's slot",
    );
  });

  it('runs the projector and the exporter through the cluster', async () => {
    await ingest(25, 'before');
    await deliveredAll();
    await projectedAll();
    expect((await projectedLag()).value).toBe(250);
  }, 90_000);

  it('counts rate limits on the cluster', async () => {
    // A burst of 5, then 429 (0.5 per second: no new permit within the loop).
    expect(await rateLimited()).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
  });

  it('survives the failover of the master holding the queues: no event missing, none twice beyond a re-sent batch', async () => {
    const slot = Number(cluster.cli(7001, 'cluster', 'keyslot', tag));
    const master = cluster.masterOf(slot);
    await ingest(20, 'at-kill');
    cluster.kill(master);
    // Ingest does not wait on Redis: it goes on while the cluster fails over.
    for (let i = 0; i < 5; i++) {
      await ingest(6, `during-${i}`);
      await new Promise((r) => setTimeout(r, 300));
    }
    const survivor = cluster.ports.find((port) => cluster.alive(port))!;
    await until(
      () => {
        const promoted = cluster.masterOf(slot);
        return promoted !== master && cluster.cli(survivor, 'cluster', 'info').includes('cluster_state:ok');
      },
      "a replica promoted for the queues' slot",
      30_000,
    ).catch((err: Error) => {
      const state = cluster.ports
        .filter((p) => cluster.alive(p))
        .map((p) => `${p}: ${cluster.cli(p, 'info', 'replication').replace(/\r?\n/g, ' ')}`)
        .join('\n');
      throw new Error(`${err.message} (killed ${master})\n${cluster.cli(survivor, 'cluster', 'nodes')}\n${state}`);
    });
    await ingest(15, 'after');

    await deliveredAll();
    await projectedAll();
    expect((await projectedLag()).value).toBe(10 * ingested.length);
    // Every event arrived; one that arrived twice came both times in the same batch (a re-send).
    const got = received();
    expect(new Set(got.map((r) => r.id))).toEqual(new Set(ingested));
    const batchesOf = new Map<string, Set<string>>();
    for (const r of got) batchesOf.set(r.id, (batchesOf.get(r.id) ?? new Set()).add(r.batch));
    expect([...batchesOf.entries()].filter(([, b]) => b.size > 1)).toEqual([]);
    expect(await rateLimited()).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
  }, 150_000);
});
