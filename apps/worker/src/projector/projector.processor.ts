import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, Logger, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { CATCH_UP_JOB, MastraObservabilityModule, MetricsProjector } from '@tollgate/usage-metrics';
import { addJob, Config, JobHandlers } from '@tollgate/platform';
import type { Queue } from 'bullmq';
import { keepJobScheduler } from '../job-schedulers';
import { WatchedWorker } from '../worker-watchdog';

/** A job runs at most this long, then hands the rest to a fresh job (other queues get a turn). */
const SLICE_MS = 20_000;
/** The schedule that catches up when no ingest wake-up came (Redis was down, another replica…). */
const SCHEDULE_MS = 5_000;

/**
 * Routes `projections` jobs to the metric rollup projector. Concurrency 1 per worker; across
 * worker processes the checkpoint's row lock keeps a single writer (the second one just returns).
 * The BullMQ worker is built here rather than with @Processor so that the watchdog can replace
 * it when it stops taking jobs (see WorkerWatchdog).
 */
@Injectable()
export class ProjectorProcessor implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('metrics-projector');
  private worker?: WatchedWorker;

  constructor(
    private readonly handlers: JobHandlers,
    private readonly projector: MetricsProjector,
    private readonly config: Config,
    @InjectQueue('projections') private readonly queue: Queue,
  ) {
    handlers.register('projections', CATCH_UP_JOB, () => this.catchUp());
  }

  async onApplicationBootstrap(): Promise<void> {
    const upsert = await keepJobScheduler(
      this.queue,
      CATCH_UP_JOB,
      { every: SCHEDULE_MS },
      { name: CATCH_UP_JOB, data: {}, opts: { removeOnComplete: 100, removeOnFail: 100 } },
    );
    this.worker = new WatchedWorker({
      queue: this.queue,
      schedulerId: CATCH_UP_JOB,
      everyMs: SCHEDULE_MS,
      upsert,
      config: this.config.values,
      logger: this.logger,
      process: (job) => this.handlers.route('projections', job),
      worker: { concurrency: 1 },
    });
    this.worker.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.worker?.close();
  }

  private async catchUp() {
    const result = await this.projector.catchUp({ maxMs: SLICE_MS });
    if (!result.caughtUp && !result.busy) {
      // Not deduplicated: this job still holds the wake-up's deduplication id.
      await addJob(this.queue, 'projections', CATCH_UP_JOB, {}, { removeOnComplete: 100, removeOnFail: 100 });
    }
    if (result.events) this.logger.debug({ msg: 'rollups caught up', ...result });
    return result;
  }
}

/** The worker's projections (one line in WorkerFeaturesModule). */
@Module({
  imports: [MastraObservabilityModule],
  providers: [ProjectorProcessor],
})
export class ProjectorModule {}
