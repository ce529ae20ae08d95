import { InjectQueue, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger, OnApplicationBootstrap } from '@nestjs/common';
import {
  EventPartitions,
  EventRetention,
  PrismaService,
  TableStatistics,
  type RetentionResult,
} from '@tollgate/database';
import { ROLLUP_PROJECTION } from '@tollgate/usage-metrics';
import { Config, JobHandlers, type JobPayload } from '@tollgate/platform';
import type { Job, Queue } from 'bullmq';
import { keepJobScheduler } from '../job-schedulers';

/** Maintenance jobs: registers their handlers (the work lives in them); JobHandlers.route runs them. */
@Processor('maintenance')
export class MaintenanceProcessor extends WorkerHost implements OnApplicationBootstrap {
  private readonly logger = new Logger('maintenance');
  private readonly retention: EventRetention;
  private readonly statistics: TableStatistics;

  constructor(
    private readonly handlers: JobHandlers,
    private readonly partitions: EventPartitions,
    private readonly config: Config,
    prisma: PrismaService,
    @InjectQueue('maintenance') private readonly queue: Queue,
  ) {
    super();
    this.retention = new EventRetention(prisma);
    this.statistics = new TableStatistics(prisma);
    handlers.register('maintenance', 'partitions.ensure', (data) => this.ensurePartitions(data));
    handlers.register('maintenance', 'retention.apply', (data) => this.applyRetention(data));
    handlers.register('maintenance', 'statistics.refresh', () => this.refreshStatistics());
  }

  async onApplicationBootstrap(): Promise<void> {
    // Hourly, and once now: a month boundary never finds the log without its partition.
    await keepJobScheduler(
      this.queue,
      'partitions.ensure',
      { every: 3600_000 },
      { name: 'partitions.ensure', data: {}, opts: { removeOnComplete: 100, removeOnFail: 100 } },
    );
    // Every minute: a table that grew (or was emptied) gets statistics, and cached plans, of its size.
    await keepJobScheduler(
      this.queue,
      'statistics.refresh',
      { every: 60_000 },
      { name: 'statistics.refresh', data: {}, opts: { removeOnComplete: 100, removeOnFail: 100 } },
    );
    // Hourly too: a month past the retention goes as soon as the rollups have read all of it.
    if (this.config.values.TOLLGATE_RETENTION_MONTHS !== undefined) {
      await keepJobScheduler(
        this.queue,
        'retention.apply',
        { every: 3600_000 },
        { name: 'retention.apply', data: {}, opts: { removeOnComplete: 100, removeOnFail: 100 } },
      );
    } else {
      await this.queue.removeJobScheduler('retention.apply');
    }
  }

  process(job: Job): Promise<unknown> {
    return this.handlers.route('maintenance', job);
  }

  private async ensurePartitions(data: JobPayload<'maintenance', 'partitions.ensure'>) {
    const names = await this.partitions.ensureAhead(
      new Date(),
      data.monthsAhead ?? this.config.values.PARTITIONS_AHEAD_MONTHS,
    );
    this.logger.debug({ msg: 'partitions ensured', names });
    return { partitions: names };
  }

  private async refreshStatistics() {
    const analyzed = await this.statistics.refresh();
    if (analyzed.length) this.logger.debug({ msg: 'table statistics taken', analyzed });
    return { analyzed };
  }

  /** Drops the months past TOLLGATE_RETENTION_MONTHS that the metric rollups cover (nothing when unset). */
  async applyRetention(
    data: JobPayload<'maintenance', 'retention.apply'>,
  ): Promise<RetentionResult | { skipped: 'TOLLGATE_RETENTION_MONTHS unset' }> {
    const months = this.config.values.TOLLGATE_RETENTION_MONTHS;
    if (months === undefined) return { skipped: 'TOLLGATE_RETENTION_MONTHS unset' };
    const result = await this.retention.apply(data.now ? new Date(data.now) : new Date(), months, ROLLUP_PROJECTION);
    if (result.waiting.length > 0)
      this.logger.warn({
        msg: 'partitions past the retention wait for the metric rollups',
        partitions: result.waiting,
      });
    return result;
  }
}
