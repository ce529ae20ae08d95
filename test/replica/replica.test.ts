import { applyMigrations, ensureDatabase, migrationsDir } from '@tollgate/database';
import { MetricsProjector, MetricsReadDb } from '@tollgate/usage-metrics';
import { randomBytes } from 'node:crypto';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { makePrimary, one, replayed, waitFor, type ReplicaPair } from './pg-cluster';

/**
 * Metric reads on a real PostgreSQL streaming replica (README "Running at scale"). The test makes
 * its own primary (initdb, 127.0.0.1:5434) and a replica of it (pg_basebackup -R, 127.0.0.1:5433),
 * runs the API with DATABASE_URL on the primary and DATABASE_READ_URL on the replica, and a second
 * API on the primary alone as the reference. Both servers and their data are removed at the end.
 */
const PRIMARY_PORT = 5434;
const REPLICA_PORT = 5433;
const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];

describe('metric queries on a streaming replica', () => {
  let pair: ReplicaPair;
  let onReplica: RunningService;
  let onPrimary: RunningService;
  let p: TestProject;

  beforeAll(async () => {
    pair = await makePrimary(PRIMARY_PORT, REPLICA_PORT);
    const db = pair.primary.url('tollgate');
    await ensureDatabase(db);
    await applyMigrations(db, migrationsDir());
    await pair.makeReplica();
    const prefix = `tollgate-replica-${randomBytes(4).toString('hex')}`;
    onReplica = await startService({
      DATABASE_URL: db,
      DATABASE_READ_URL: pair.replica.url('tollgate'),
      QUEUE_PREFIX: prefix,
    });
    onPrimary = await startService({ DATABASE_URL: db, QUEUE_PREFIX: prefix });
    p = await createProject(onReplica.url);
  }, 180_000);

  afterAll(async () => {
    await onReplica?.close();
    await onPrimary?.close();
    pair?.destroy();
  });

  const ingest = async (events: Record<string, unknown>[]) => {
    const res = await call(onReplica.url, 'POST', '/v1/events', { token: p.key, body: { events } });
    expect([res.status, res.body.accepted]).toEqual([200, events.length]);
  };
  const projectAll = async () => {
    for (;;) if ((await onReplica.app.get(MetricsProjector).catchUp()).caughtUp) return;
  };
  /** The same questions a dashboard asks, without their lag. */
  const ask = async (svc: RunningService) => {
    const post = async (route: string, body: unknown) => {
      const res = await call(svc.url, 'POST', `/api/observability/metrics/${route}`, { token: p.key, body });
      expect(res.status).toBe(200);
      return res.body;
    };
    const answers = {
      sum: await post('aggregate', { name: TOTALS, aggregation: 'sum' }),
      byModel: await post('breakdown', { name: TOTALS, groupBy: ['model'], aggregation: 'sum' }),
      hourly: await post('timeseries', { name: TOTALS, interval: '1h', aggregation: 'sum' }),
      p50: await post('percentiles', { name: 'mastra_model_total_input_tokens', percentiles: [0.5], interval: '1d' }),
      names: (await call(svc.url, 'GET', '/api/observability/discovery/entity-names', { token: p.key })).body,
    };
    const lag = answers.sum.lag;
    for (const a of Object.values(answers)) delete (a as { lag?: unknown }).lag;
    return { answers, lag };
  };
  const check = async (resourceId: string) => {
    const res = await call(onReplica.url, 'POST', '/v1/guard/check', {
      token: p.key,
      body: {
        context: { resourceId },
        limits: [{ scope: 'resource', window: '24h', maxTotalTokens: 1_000_000 }],
        estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 1, maxOutputTokens: 1 },
      },
    });
    expect(res.status).toBe(200);
    return res.body.usage[`resource:${resourceId}@24h`].totalTokens as number;
  };

  it('answers exactly what the primary answers, read from the replica', async () => {
    const models = ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4'];
    await ingest(
      Array.from({ length: 60 }, (_, i) =>
        stepEvent({
          model: models[i % 3],
          provider: i % 3 === 2 ? 'anthropic' : 'openai',
          entityName: `agent-${i % 4}`,
          resourceId: 'r-1',
          usage: { inputTokens: 100 + i, outputTokens: 7 * i },
          occurredAt: new Date(Date.now() - i * 600_000).toISOString(),
        }),
      ),
    );
    await projectAll();
    await ingest([stepEvent({ resourceId: 'r-1', usage: { inputTokens: 5, outputTokens: 5 } })]); // one left in the log's tail
    await replayed(pair);
    const read = onReplica.app.get(MetricsReadDb);
    const replica = await ask(onReplica);
    const primary = await ask(onPrimary);
    expect(replica.answers).toEqual(primary.answers);
    expect(replica.answers.sum.value).toBe(60 * 100 + 1770 + 7 * 1770 + 10);
    expect(replica.lag.events).toBe(1);
    // It was the replica that answered (its pool served them), not the primary.
    expect(read.replica!.totalCount).toBeGreaterThan(0);
    expect(read.fallbacks).toBe(0);
  });

  it('with replay paused: checks and ingest see new steps at once, metric answers stay at the replay point and report its lag', async () => {
    await projectAll();
    await replayed(pair);
    const settled = await ask(onReplica);
    expect(settled.lag.ms).toBeLessThan(1000);
    const tokensBefore = await check('r-1');

    await one(pair.replica.url(), 'SELECT pg_wal_replay_pause()');
    await waitFor(
      async () =>
        (await one<{ s: string }>(pair.replica.url(), 'SELECT pg_get_wal_replay_pause_state() AS s'))?.s === 'paused',
      'replay paused',
    );
    const step = stepEvent({ resourceId: 'r-1', usage: { inputTokens: 1000, outputTokens: 234 } });
    await ingest([step]);
    // The guard reads the primary: the step counts the moment its ingest answered.
    expect(await check('r-1')).toBe(tokensBefore + 1234);
    // Ingest's idempotency reads the primary too: the replica has not seen the step, ingest has.
    const again = await call(onReplica.url, 'POST', '/v1/events', { token: p.key, body: { events: [step] } });
    expect([again.body.accepted, again.body.duplicates]).toEqual([0, 1]);

    await new Promise((r) => setTimeout(r, 1500));
    const stale = await ask(onReplica);
    const current = await ask(onPrimary);
    expect(stale.answers).toEqual(settled.answers); // as of the replay point
    expect(current.answers.sum.value).toBe(settled.answers.sum.value + 1234);
    // The lag says so: no unprojected event is visible there, but the replay is 1.5 s behind.
    expect(stale.lag.events).toBe(0);
    expect(stale.lag.ms).toBeGreaterThanOrEqual(1400);
    expect(current.lag.events).toBe(1);

    await one(pair.replica.url(), 'SELECT pg_wal_replay_resume()');
    await projectAll();
    await replayed(pair);
    const caughtUp = await ask(onReplica);
    expect(caughtUp.answers).toEqual((await ask(onPrimary)).answers);
    expect(caughtUp.lag).toEqual({ events: 0, ms: expect.any(Number) });
    expect(caughtUp.lag.ms).toBeLessThan(1000);
  });

  it('with the replica stopped: metric queries run on the primary, the guard and ingest are unaffected', async () => {
    pair.replica.stop('fast');
    const read = onReplica.app.get(MetricsReadDb);
    const fallbacks = read.fallbacks;
    await ingest([stepEvent({ resourceId: 'r-1', usage: { inputTokens: 1, outputTokens: 1 } })]);
    const tokens = await check('r-1');
    const during = await ask(onReplica);
    expect(during.answers).toEqual((await ask(onPrimary)).answers);
    expect(read.fallbacks).toBeGreaterThan(fallbacks);
    await ingest([stepEvent({ resourceId: 'r-1', usage: { inputTokens: 2, outputTokens: 2 } })]);
    expect(await check('r-1')).toBe(tokens + 4);

    // Back again: after the retry interval the replica answers again.
    pair.replica.start();
    await replayed(pair, 30_000);
    await new Promise((r) => setTimeout(r, 2100));
    await ask(onReplica);
    const after = read.fallbacks;
    await ask(onReplica);
    expect(read.fallbacks).toBe(after);
  });
});
