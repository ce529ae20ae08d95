import { InjectQueue } from '@nestjs/bullmq';
import { Logger } from '@nestjs/common';
import { EventsHandler, type IEventHandler } from '@nestjs/cqrs';
import { StepUsageRecorded } from '@tollgate/contracts';
import { StepsRepriced } from '@tollgate/ledger';
import { addJob } from '@tollgate/platform';
import type { Queue } from 'bullmq';

/** At most one wake-up per this many ms per process; the projector reads whole batches anyway. */
const DEBOUNCE_MS = 250;
/** Ingest never waits on Redis: a wake-up that does not land in this time is dropped. */
const ADD_TIMEOUT_MS = 500;

export const CATCH_UP_JOB = 'rollups.catch-up';

/**
 * Wakes the rollup projector after ingest (or a reprice) commits, best-effort: debounced, never
 * awaited by the request, dropped when Redis is slow or down (the schedule catches up, and queries
 * are exact meanwhile because they read the unprojected tail from the log).
 */
@EventsHandler(StepUsageRecorded, StepsRepriced)
export class WakeProjectorOnIngest implements IEventHandler<StepUsageRecorded | StepsRepriced> {
  private readonly logger = new Logger('metrics-projector');
  private timer: NodeJS.Timeout | null = null;
  private inFlight = false;

  constructor(@InjectQueue('projections') private readonly queue: Queue) {}

  handle(): void {
    if (this.timer || this.inFlight) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.inFlight = true;
      // The job id makes concurrent wake-ups from several API replicas one job.
      const add = addJob(
        this.queue,
        'projections',
        CATCH_UP_JOB,
        {},
        { deduplication: { id: CATCH_UP_JOB }, removeOnComplete: 100, removeOnFail: 100 },
      );
      let timeout: NodeJS.Timeout | undefined;
      const timedOut = new Promise<void>((resolve) => (timeout = setTimeout(resolve, ADD_TIMEOUT_MS)));
      void Promise.race([add, timedOut])
        .catch((err: unknown) => this.logger.debug({ msg: 'projector wake-up dropped', err: String(err) }))
        .finally(() => {
          clearTimeout(timeout);
          // A wake-up stuck on a dead Redis stays in flight until it resolves; later ones are skipped meanwhile.
          void add.catch(() => undefined).finally(() => (this.inFlight = false));
        });
    }, DEBOUNCE_MS);
    this.timer.unref();
  }
}
