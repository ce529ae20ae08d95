import { Logger } from '@nestjs/common';
import type { JobSchedulerTemplateOptions, Queue, RepeatOptions } from 'bullmq';

const logger = new Logger('job-schedulers');

/**
 * Upserts a BullMQ job scheduler now and again each time the queue's Redis connection becomes
 * ready. A Redis that restarts without its data (no persistence, a failover to an empty replica)
 * loses the schedulers; without this the exporters' tick and the periodic catch-up would stop
 * until the worker restarts (found by the Redis outage scenario of test/faults). Returns the
 * upsert, for a watchdog that finds the schedule late (WorkerWatchdog).
 */
export async function keepJobScheduler(
  queue: Queue,
  id: string,
  repeat: Omit<RepeatOptions, 'key'>,
  template: { name: string; data: object; opts?: JobSchedulerTemplateOptions },
): Promise<() => Promise<unknown>> {
  const upsert = () => queue.upsertJobScheduler(id, repeat, template);
  await upsert();
  queue.getBackend().on('ready', () => {
    upsert().then(
      () => logger.debug({ msg: 'job scheduler upserted after Redis reconnect', id }),
      (err: Error) =>
        logger.warn({ msg: 'could not upsert a job scheduler after Redis reconnect', id, error: err.message }),
    );
  });
  return upsert;
}
