import { InjectQueue, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger, Module, OnApplicationBootstrap } from '@nestjs/common';
import { CATCH_UP_JOB, MetricsModule, MetricsProjector } from '@tollgate/usage-metrics';
import { addJob, JobHandlers } from '@tollgate/platform';
import type { Job, Queue } from 'bullmq';
import { keepJobScheduler } from '../job-schedulers';

/** A job runs at most this long, then hands the rest to a fresh job (other queues get a turn). */
const SLICE_MS = 20_000;
/** The schedule that catches up when no ingest wake-up came (Redis was down, another replica…). */
const SCHEDULE_MS = 5_000;

/**
 * Routes `projections` jobs to the metric rollup projector. Concurrency 1 per worker; across
 * worker processes the checkpoint's row lock keeps a single writer (the second one just returns).
 */
@Processor('projections', { concurrency: 1 })
export class ProjectorProcessor extends WorkerHost implements OnApplicationBootstrap {
  private readonly logger = new Logger('metrics-projector');

  constructor(
    private readonly handlers: JobHandlers,
    private readonly projector: MetricsProjector,
    @InjectQueue('projections') private readonly queue: Queue,
  ) {
    super();
    handlers.register('projections', CATCH_UP_JOB, () => this.catchUp());
  }

  async onApplicationBootstrap(): Promise<void> {
    await keepJobScheduler(
      this.queue,
      CATCH_UP_JOB,
      { every: SCHEDULE_MS },
      { name: CATCH_UP_JOB, data: {}, opts: { removeOnComplete: 100, removeOnFail: 100 } },
    );
  }

  process(job: Job): Promise<unknown> {
    return this.handlers.route('projections', job);
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
  imports: [MetricsModule],
  providers: [ProjectorProcessor],
})
export class ProjectorModule {}
