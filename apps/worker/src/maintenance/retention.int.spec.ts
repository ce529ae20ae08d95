import { randomUUID } from 'node:crypto';
import { EventPartitions, listEventPartitions, PrismaService } from '@tollgate/database';
import { MetricsProjector } from '@tollgate/usage-metrics';
import { Config, ConfigError, JobHandlers, loadConfig } from '@tollgate/platform';
import type { Queue } from 'bullmq';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { MaintenanceProcessor } from './maintenance.processor';

/**
 * Retention with a fixed clock: now is 2021-03-10, TOLLGATE_RETENTION_MONTHS=13, so the months
 * before 2020-02 (December 2019, January 2020) go and February 2020 onwards stays. The job works
 * on the whole database, and other specs leave older months of their own (ingest's backfill test
 * makes May 2003): the answers are read for this spec's months and its project's rows.
 */
describe('retention.apply (TOLLGATE_RETENTION_MONTHS)', () => {
  const NOW = '2021-03-10T12:00:00.000Z';
  const prisma = new PrismaService(TEST_DATABASE_URL, 3);
  const projector = new MetricsProjector(prisma);
  const handlers = new JobHandlers();
  const config = new Config(loadConfig({ DATABASE_URL: TEST_DATABASE_URL, TOLLGATE_RETENTION_MONTHS: '13' }));
  const processor = new MaintenanceProcessor(handlers, new EventPartitions(prisma), config, prisma, {} as Queue);
  const project = `retention-${randomUUID()}`;
  const months = ['2019-12-15T10:00:00Z', '2020-01-15T10:00:00Z', '2020-02-15T10:00:00Z'];
  /** This spec's months (the job also drops other specs' older months: ingest's backfill makes May 2003). */
  const OWN = /^events_20(19|20)_/;

  beforeAll(async () => {
    await prisma.$executeRawUnsafe(`INSERT INTO projects (id, name) VALUES ($1, $1)`, project);
    for (const [i, at] of months.entries()) {
      await prisma.$queryRawUnsafe(`SELECT ensure_event_partition($1::timestamptz)`, at);
      await prisma.$executeRawUnsafe(
        `INSERT INTO events (project_id, event_id, type, occurred_at, provider, model, input_tokens, output_tokens, cost_micros, cost_unit)
         VALUES ($1, $2, 'StepUsageRecorded', $3::timestamptz, 'openai', 'gpt-4o', 100, 10, 1000, 'USD')`,
        project,
        `step-${i}`,
        at,
      );
      await prisma.$executeRawUnsafe(
        `INSERT INTO event_ids (project_id, event_id, occurred_at) VALUES ($1, $2, $3::timestamptz)`,
        project,
        `step-${i}`,
        at,
      );
      await prisma.$executeRawUnsafe(
        `INSERT INTO usage_counters (project_id, scope, scope_id, granularity, bucket_start, cost_unit, cost_micros, events)
         VALUES ($1, 'thread', 't1', 'd', date_trunc('day', $2::timestamptz), 'USD', 1000, 1), ($1, 'run', 'r-${i}', 'r', 'epoch', 'USD', 1000, 1)`,
        project,
        at,
      );
    }
  });
  afterAll(() => prisma.onModuleDestroy());

  /** The job's answer for this spec's months; its row counts are checked on this project's rows below. */
  const ownResult = (r: Awaited<ReturnType<MaintenanceProcessor['applyRetention']>>) =>
    'skipped' in r
      ? r
      : {
          cutoff: r.cutoff,
          dropped: r.dropped.filter((n) => OWN.test(n)),
          waiting: r.waiting.filter((n) => OWN.test(n)),
        };

  /** The projector reads only below the oldest transaction open on the cluster (shared with other runs): retry until it has read ours. */
  const projectAll = async () => {
    for (let i = 0; i < 100; i++) {
      await projector.catchUp();
      const [row] = await prisma.$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM events e, projection_checkpoints c WHERE c.name = 'metric_rollups' AND e.project_id = $1 AND (e.tx, e.position) > (c.tx, c.position)`,
        project,
      );
      if (row.n === 0) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error('the projector did not reach the test events');
  };
  const partitionNames = async () => (await listEventPartitions(prisma)).map((p) => p.name).filter((n) => OWN.test(n));
  const eventIds = async () =>
    (
      await prisma.$queryRawUnsafe<{ event_id: string }[]>(
        `SELECT event_id FROM event_ids WHERE project_id = $1 ORDER BY 1`,
        project,
      )
    ).map((r) => r.event_id);
  const counters = async () =>
    (
      await prisma.$queryRawUnsafe<{ k: string }[]>(
        `SELECT granularity::text || ':' || scope_id AS k FROM usage_counters WHERE project_id = $1 ORDER BY 1`,
        project,
      )
    ).map((r) => r.k);
  const dailyRollup = async () =>
    (
      await prisma.$queryRawUnsafe<{ day: Date; count: string }[]>(
        `SELECT bucket_start AS day, sum(count)::text AS count FROM metric_rollups WHERE project_id = $1 AND granularity = 'd' AND name = 1 GROUP BY 1 ORDER BY 1`,
        project,
      )
    ).map((r) => [r.day.toISOString().slice(0, 10), r.count]);

  it('drops nothing while the metric rollups have not read the months past the retention', async () => {
    // The projection's checkpoint stands before these events: the projector has not run since they were written.
    const result = await processor.applyRetention({ now: NOW });
    expect(ownResult(result)).toEqual({
      cutoff: '2020-02-01T00:00:00.000Z',
      dropped: [],
      waiting: ['events_2019_12', 'events_2020_01'],
    });
    expect(await partitionNames()).toEqual(['events_2019_12', 'events_2020_01', 'events_2020_02']);
    expect(await eventIds()).toEqual(['step-0', 'step-1', 'step-2']);
    expect(await counters()).toEqual(['d:t1', 'd:t1', 'd:t1', 'r:r-0', 'r:r-1', 'r:r-2']);
  });

  it('once the rollups cover them, detaches and drops the whole months past it; dashboards keep their history', async () => {
    await projectAll();
    const before = await dailyRollup();
    expect(before).toEqual([
      ['2019-12-15', '1'],
      ['2020-01-15', '1'],
      ['2020-02-15', '1'],
    ]);

    const result = await processor.applyRetention({ now: NOW });
    expect(ownResult(result)).toEqual({
      cutoff: '2020-02-01T00:00:00.000Z',
      dropped: ['events_2019_12', 'events_2020_01'],
      waiting: [],
    });
    expect(await partitionNames()).toEqual(['events_2020_02']);
    // Not a partition any more, and not left behind as a detached table either.
    expect(
      await prisma.$queryRawUnsafe(
        `SELECT relname FROM pg_class WHERE relname IN ('events_2019_12', 'events_2020_01')`,
      ),
    ).toEqual([]);
    expect(await prisma.$queryRawUnsafe(`SELECT event_id FROM events WHERE project_id = $1`, project)).toEqual([
      { event_id: 'step-2' },
    ]);
    // The idempotency keys and the guard's hour/day buckets of the dropped months go with them; a run's all-time rows stay.
    expect(await eventIds()).toEqual(['step-2']);
    expect(await counters()).toEqual(['d:t1', 'r:r-0', 'r:r-1', 'r:r-2']);
    expect(await dailyRollup()).toEqual(before);
  });

  it('is a no-op when run again', async () => {
    const result = await processor.applyRetention({ now: NOW });
    expect(ownResult(result)).toEqual({ cutoff: '2020-02-01T00:00:00.000Z', dropped: [], waiting: [] });
    expect(await partitionNames()).toEqual(['events_2020_02']);
    expect(await eventIds()).toEqual(['step-2']);
  });

  it('finishes a detach an earlier run left half done', async () => {
    // A month later February 2020 is past the retention too: detached by a run that then stopped.
    await projectAll();
    await prisma.$executeRawUnsafe(`ALTER TABLE events DETACH PARTITION events_2020_02`);
    const result = await processor.applyRetention({ now: '2021-04-02T00:00:00.000Z' });
    expect(ownResult(result)).toEqual({ cutoff: '2020-03-01T00:00:00.000Z', dropped: ['events_2020_02'], waiting: [] });
    expect(await prisma.$queryRawUnsafe(`SELECT relname FROM pg_class WHERE relname = 'events_2020_02'`)).toEqual([]);
    expect(await eventIds()).toEqual([]);
  });

  it('refuses a retention shorter than 13 months, and an ingest age it would not keep', () => {
    expect(() => loadConfig({ TOLLGATE_RETENTION_MONTHS: '12' })).toThrow(ConfigError);
    expect(() => loadConfig({ TOLLGATE_RETENTION_MONTHS: '12' })).toThrow(
      'TOLLGATE_RETENTION_MONTHS: must be at least 13 (a 365-day guard window must stay in the log)',
    );
    expect(() => loadConfig({ TOLLGATE_RETENTION_MONTHS: '13', INGEST_MAX_AGE_DAYS: '400' })).toThrow(
      'INGEST_MAX_AGE_DAYS: must be at most 336 with TOLLGATE_RETENTION_MONTHS=13',
    );
  });

  it('does nothing when TOLLGATE_RETENTION_MONTHS is unset', async () => {
    const unset = new MaintenanceProcessor(
      new JobHandlers(),
      new EventPartitions(prisma),
      new Config(loadConfig({})),
      prisma,
      {} as Queue,
    );
    expect(await unset.applyRetention({ now: NOW })).toEqual({ skipped: 'TOLLGATE_RETENTION_MONTHS unset' });
  });
});
