import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import { backoffMs, EXPORT_BACKOFF, ExportPipeline, SinkError } from '@tollgate/exporters';
import { Config, JobHandlers } from '@tollgate/platform';
import type { Queue } from 'bullmq';
import { keepJobScheduler } from '../job-schedulers';
import { WatchedWorker } from '../worker-watchdog';

/**
 * Routes the exports queue's jobs to the export pipeline. The BullMQ worker is built here rather
 * than with @Processor because its lock duration, concurrency and backoff strategy come from the
 * configuration: the lock bounds how long a crashed worker's batch waits to be taken over, and
 * because a watchdog replaces it when it stops taking jobs (see WorkerWatchdog).
 */
@Injectable()
export class ExportsProcessor implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('exports');
  private worker?: WatchedWorker;

  constructor(
    private readonly handlers: JobHandlers,
    private readonly config: Config,
    private readonly prisma: PrismaService,
    pipeline: ExportPipeline,
    @InjectQueue('exports') private readonly queue: Queue,
  ) {
    handlers.register('exports', 'exports.tick', () => pipeline.tick());
    handlers.register('exports', 'export.drain', (data, attempt) =>
      pipeline.drain(data.exporterId, attempt.jobId ?? 'unknown'),
    );
    handlers.register('exports', 'export.deliver', (data) => pipeline.deliver(data.batchId));
  }

  async onApplicationBootstrap(): Promise<void> {
    const c = this.config.values;
    if (!c.TOLLGATE_SECRET_KEY) {
      const sealed = await this.prisma.exporter.count({ where: { secrets: { not: null } } });
      if (sealed > 0)
        this.logger.error(
          `${sealed} exporter(s) have encrypted secrets but TOLLGATE_SECRET_KEY is not set: they pause with that reason at their next batch. Set the key and resume them.`,
        );
    }
    const upsert = await keepJobScheduler(
      this.queue,
      'exports.tick',
      { every: c.EXPORTS_TICK_MS },
      { name: 'exports.tick', data: {}, opts: { removeOnComplete: true, removeOnFail: 100 } },
    );
    // The tick drains every exporter and gives any batch whose job is gone a new one: while it
    // runs, every event after a checkpoint gets delivered, whatever Redis lost.
    this.worker = new WatchedWorker({
      queue: this.queue,
      schedulerId: 'exports.tick',
      everyMs: c.EXPORTS_TICK_MS,
      upsert,
      config: c,
      logger: this.logger,
      process: (job) => this.handlers.route('exports', job),
      worker: {
        concurrency: c.EXPORTS_CONCURRENCY,
        lockDuration: c.EXPORTS_LOCK_MS,
        stalledInterval: c.EXPORTS_LOCK_MS,
        // A batch whose worker died is taken over, not failed: its delivery is idempotent by batch id.
        maxStalledCount: 10,
        settings: {
          backoffStrategy: (attemptsMade, type, err, job) => {
            if (type !== EXPORT_BACKOFF) return 1000;
            const initial = Number(
              job?.opts.backoff && typeof job.opts.backoff === 'object' ? job.opts.backoff.delay : 1000,
            );
            const data = job?.data as { maxBackoffMs?: number; priorAttempts?: number } | undefined;
            const attempts = attemptsMade + (data?.priorAttempts ?? 0);
            return backoffMs(
              attempts,
              initial,
              Number(data?.maxBackoffMs ?? 300_000),
              Math.random,
              err instanceof SinkError ? err.retryAfterMs : undefined,
            );
          },
        },
      },
    });
    this.worker.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.worker?.close();
  }
}
