import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, Logger, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { CATCH_UP_JOB, MetricsModule, MetricsProjector } from '@tollgate/usage-metrics';
import { addJob, Config, JobHandlers, queueConnection, redisOutage } from '@tollgate/platform';
import { Worker, type Job, type Queue } from 'bullmq';
import { Cluster } from 'ioredis';
import { keepJobScheduler } from '../job-schedulers';
import { WorkerWatchdog } from '../worker-watchdog';

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
  private worker?: Worker;
  private connection?: ReturnType<typeof queueConnection>;
  private watchdog?: WorkerWatchdog;

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
    this.watchdog = new WorkerWatchdog({
      queue: this.queue,
      schedulerId: CATCH_UP_JOB,
      everyMs: SCHEDULE_MS,
      upsert,
      replace: () => this.replaceWorker(),
      logger: this.logger,
    });
    this.startWorker();
    this.watchdog.start();
  }

  private startWorker(): void {
    this.connection = queueConnection(this.config.values);
    this.worker = new Worker('projections', (job) => this.process(job), {
      connection: this.connection,
      prefix: this.config.values.QUEUE_PREFIX,
      concurrency: 1,
    });
    this.worker.on(
      'error',
      (err) =>
        redisOutage.failed(err, 'worker projections') ||
        this.logger.warn({ msg: 'projections worker error', error: err.message }),
    );
  }

  /** A new worker on a new connection; the stuck one is closed without waiting for it (it may never answer). */
  private replaceWorker(): void {
    const [worker, connection] = [this.worker, this.connection];
    this.startWorker();
    worker?.close(true).catch(() => undefined);
    if (connection instanceof Cluster) connection.disconnect();
  }

  process(job: Job): Promise<unknown> {
    const run = () => this.handlers.route('projections', job);
    return this.watchdog ? this.watchdog.track(run) : run();
  }

  async onModuleDestroy(): Promise<void> {
    this.watchdog?.stop();
    await this.worker?.close();
    // A Cluster client given to BullMQ is ours to close.
    if (this.connection instanceof Cluster) this.connection.disconnect();
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
