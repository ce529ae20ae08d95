import type { Logger } from '@nestjs/common';
import type { Queue } from 'bullmq';

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
