import type { Logger } from '@nestjs/common';
import { queueConnection, redisOutage, type Config } from '@tollgate/platform';
import { Worker, type Job, type Queue, type WorkerOptions } from 'bullmq';
import { Cluster } from 'ioredis';
import { queueFailures } from '@tollgate/telemetry';

export interface WorkerWatchdogOptions {
  queue: Queue;
  /** The job scheduler that keeps the queue moving (its job runs every `everyMs`). */
  schedulerId: string;
  everyMs: number;
  /** Upserts that scheduler again (keepJobScheduler's). */
  upsert: () => Promise<unknown>;
  /** Builds a new worker (on a new connection) in place of the one that stopped; closes the old one. */
  replace: () => void;
  logger: Logger;
}

/**
 * Keeps a queue's work going when Redis took away what drives it. A failover can lose a
 * scheduler's next job (a write the replica never got), and a BullMQ worker has been seen
 * waiting for ever on the blocking connection it re-opened during one (ioredis drops the
 * promise of a Cluster connect whose ready check failed). Both look the same from outside: the
 * scheduler's job is overdue. Then the scheduler is upserted, and when the worker has also
 * started no job in that time and runs none, it is replaced. The work itself waits in
 * PostgreSQL (the log after each checkpoint, the export batches), and the scheduled job finds
 * it there, so a running schedule is all a queue needs to catch up.
 */
export class WorkerWatchdog {
  /** A schedule this late (and a worker this idle) is stuck rather than slow. */
  readonly stuckAfterMs: number;
  private running = 0;
  private lastStartedAt = Date.now();
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly options: WorkerWatchdogOptions) {
    this.stuckAfterMs = Math.max(10_000, 3 * options.everyMs);
  }

  /** Runs a job's processing, counted (the processor function of the worker). */
  async track<T>(work: () => Promise<T>): Promise<T> {
    this.lastStartedAt = Date.now();
    this.running++;
    try {
      return await work();
    } finally {
      this.running--;
    }
  }

  start(): void {
    this.timer = setInterval(() => {
      this.check().catch((err: Error) =>
        // Redis not answering: a new worker would wait the same way (the outage is logged already).
        this.options.logger.debug({ msg: 'watchdog check failed', error: err.message }),
      );
    }, this.stuckAfterMs / 2);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** One look: 'ok', 'rescheduled' (the schedule was late, the worker is busy or just worked) or 'replaced'. */
  async check(now = Date.now()): Promise<'ok' | 'rescheduled' | 'replaced'> {
    if (this.stopped) return 'ok';
    const { queue, schedulerId, logger } = this.options;
    const scheduler = await queue.getJobScheduler(schedulerId);
    if (scheduler?.next !== undefined && now - scheduler.next < this.stuckAfterMs) return 'ok';
    await this.options.upsert();
    if (this.stopped || this.running > 0 || now - this.lastStartedAt < this.stuckAfterMs) return 'rescheduled';
    logger.warn({
      msg: 'the worker took no job while its schedule was due: replacing it',
      queue: queue.name,
      scheduleDueSince: scheduler?.next === undefined ? 'no schedule' : new Date(scheduler.next).toISOString(),
      lastJobStartedAt: new Date(this.lastStartedAt).toISOString(),
    });
    // The new worker gets stuckAfterMs of its own before it is judged.
    this.lastStartedAt = now;
    this.options.replace();
    return 'replaced';
  }
}

export interface WatchedWorkerOptions {
  queue: Queue;
  /** The job scheduler that keeps the queue moving, its period, and what upserts it again. */
  schedulerId: string;
  everyMs: number;
  upsert: () => Promise<unknown>;
  config: Config['values'];
  logger: Logger;
  process: (job: Job) => Promise<unknown>;
  /** The BullMQ worker's own options (its connection and prefix come from the configuration). */
  worker?: Omit<WorkerOptions, 'connection' | 'prefix'>;
}

/**
 * A queue's BullMQ worker, on a connection of its own, under a {@link WorkerWatchdog} that
 * replaces it (new worker, new connection) when it stops taking jobs.
 */
export class WatchedWorker {
  private worker?: Worker;
  private connection?: ReturnType<typeof queueConnection>;
  private readonly watchdog: WorkerWatchdog;

  constructor(private readonly options: WatchedWorkerOptions) {
    const { queue, schedulerId, everyMs, upsert, logger } = options;
    this.watchdog = new WorkerWatchdog({ queue, schedulerId, everyMs, upsert, logger, replace: () => this.replace() });
  }

  start(): void {
    this.startWorker();
    this.watchdog.start();
  }

  private startWorker(): void {
    const { queue, config, logger, process, worker } = this.options;
    this.connection = queueConnection(config);
    this.worker = new Worker(queue.name, (job) => this.watchdog.track(() => process(job)), {
      ...worker,
      connection: this.connection,
      prefix: config.QUEUE_PREFIX,
    });
    this.worker.on(
      'error',
      (err) =>
        redisOutage.failed(err, `worker ${queue.name}`) ||
        logger.warn({ msg: `${queue.name} worker error`, error: err.message }),
    );
    this.worker.on('failed', () => queueFailures.inc({ queue: queue.name }));
  }

  /** A new worker on a new connection; the stuck one is closed without waiting for it (it may never answer). */
  private replace(): void {
    const [worker, connection] = [this.worker, this.connection];
    this.startWorker();
    worker?.close(true).catch(() => undefined);
    if (connection instanceof Cluster) connection.disconnect();
  }

  async close(): Promise<void> {
    this.watchdog.stop();
    await this.worker?.close();
    // A Cluster client given to BullMQ is ours to close.
    if (this.connection instanceof Cluster) this.connection.disconnect();
  }
}
