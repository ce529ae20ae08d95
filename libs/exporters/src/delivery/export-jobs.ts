import { InjectQueue } from '@nestjs/bullmq';
import { Injectable } from '@nestjs/common';
import { addJob, type JobInput } from '@tollgate/platform';
import type { Queue } from 'bullmq';
import type { ExporterRecord } from '../exporter/exporter-record';

/** Name of the custom BullMQ backoff strategy the exports worker registers. */
export const EXPORT_BACKOFF = 'exporter-jitter';

/** Enqueues the exports queue's jobs with their options, for the API and the worker alike. */
@Injectable()
export class ExportJobs {
  constructor(@InjectQueue('exports') readonly queue: Queue) {}

  /**
   * Asks for a drain; while one runs, at most one more waits (BullMQ deduplication). `delayMs`
   * holds it back, for a drain its project's share of the slots had no room for.
   */
  async drain(exporterId: string, delayMs = 0): Promise<void> {
    const data: JobInput<'exports', 'export.drain'> = { exporterId };
    await addJob(this.queue, 'exports', 'export.drain', data, {
      delay: delayMs,
      deduplication: { id: `drain-${exporterId}`, keepLastIfActive: true },
      removeOnComplete: true,
      removeOnFail: 100,
    });
  }

  /**
   * Delivers a batch; BullMQ retries it with the exporter's backoff. The batch row counts the
   * attempts and decides when to give up, so BullMQ's own limit only has to be high enough.
   */
  async deliver(
    batchId: string,
    jobId: string,
    exporter: Pick<ExporterRecord, 'id' | 'settings'>,
    priorAttempts = 0,
    delayMs = 0,
  ): Promise<void> {
    const { retry } = exporter.settings;
    const data: JobInput<'exports', 'export.deliver'> = {
      batchId,
      exporterId: exporter.id,
      maxBackoffMs: retry.maxBackoffMs,
      priorAttempts,
    };
    await addJob(this.queue, 'exports', 'export.deliver', data, {
      jobId,
      delay: delayMs,
      attempts: Math.max(1, retry.maxAttempts - priorAttempts),
      backoff: { type: EXPORT_BACKOFF, delay: retry.initialBackoffMs },
      removeOnComplete: true,
      removeOnFail: { count: 1000 },
    });
  }
}
