import { z } from 'zod';

/**
 * Every queue and every job the worker runs, with its payload schema: the one place the API
 * (producer) and the worker (consumer) both import. The worker refuses to start when a job named
 * here has no handler.
 */
export const QUEUES = {
  maintenance: {
    /** Creates the event log's monthly partitions ahead of time (also done on demand at ingest). */
    'partitions.ensure': z.object({ monthsAhead: z.number().int().min(1).max(24).optional() }),
    /** Drops monthly partitions past TOLLGATE_RETENTION_MONTHS that the rollups cover (`now`: a fixed clock, for tests). */
    'retention.apply': z.object({ now: z.iso.datetime().optional() }),
    /** Takes the statistics of tables that changed enough since their last ones, so cached plans fit their size (libs/database statistics.ts). */
    'statistics.refresh': z.object({}),
  },
  guard: {
    /** Marks expired reservations lapsed and logs it (they stop counting at expiry regardless). */
    'reservations.sweep': z.object({}),
  },
  /**
   * Exporters (libs/exporters). One fixed queue for every exporter: the events wait in the log, not
   * in Redis, so a per-exporter "queue" is the log after that exporter's checkpoint; these jobs
   * only move it. At most one batch per exporter is in flight (enforced in PostgreSQL), so two
   * workers never deliver the same exporter's stream at once.
   */
  exports: {
    /** Periodic: schedules a drain for every active exporter (flushes batches that waited long enough). */
    'exports.tick': z.object({}),
    /** Cuts the exporter's next batch after its checkpoint, if one is due, and enqueues its delivery. */
    'export.drain': z.object({ exporterId: z.string().min(1) }),
    /** Delivers one batch (re-read from the log by its range); retried with backoff, then dead-lettered. */
    'export.deliver': z.object({
      batchId: z.string().min(1),
      exporterId: z.string().min(1),
      maxBackoffMs: z.number().int().positive(),
      /** Attempts made before this job (the drain makes the first one inline); scales the backoff. */
      priorAttempts: z.number().int().min(0).default(0),
    }),
  },
  projections: {
    /** Brings the metric rollups up to the log (woken by ingest, and on a schedule). */
    'rollups.catch-up': z.object({}),
  },
} as const satisfies Record<string, Record<string, z.ZodType>>;

export type QueueName = keyof typeof QUEUES;
export type JobName<Q extends QueueName> = keyof (typeof QUEUES)[Q] & string;
export type JobPayload<Q extends QueueName, J extends JobName<Q>> = z.infer<(typeof QUEUES)[Q][J]>;

export const QUEUE_NAMES = Object.keys(QUEUES) as QueueName[];

export function jobNamesOf(queue: QueueName): string[] {
  return Object.keys(QUEUES[queue]);
}
