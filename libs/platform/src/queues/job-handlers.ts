import { Injectable } from '@nestjs/common';
import { jobNamesOf, QUEUE_NAMES, type QueueName } from './queues';

/** What a handler may need to know about the attempt (retry-aware handlers such as exporters). */
export interface JobAttempt {
  /** Attempts made before this one. */
  attemptsMade: number;
  /** Attempts allowed in all. */
  attempts: number;
  /** The BullMQ job id. */
  jobId?: string;
}

export type JobHandler = (data: unknown, attempt?: JobAttempt) => Promise<unknown>;

/**
 * Handlers registered by the worker's features, by queue and job name. `assertComplete` is called
 * at boot: a job named in QUEUES without a handler (or with two) stops the worker right there,
 * not when the first such job arrives.
 */
@Injectable()
export class JobHandlers {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly duplicates: string[] = [];

  register(queue: QueueName, job: string, handler: JobHandler): void {
    const key = `${queue}/${job}`;
    if (this.handlers.has(key)) this.duplicates.push(key);
    this.handlers.set(key, handler);
  }

  get(queue: QueueName, job: string): JobHandler | undefined {
    return this.handlers.get(`${queue}/${job}`);
  }

  assertComplete(queues: readonly QueueName[] = QUEUE_NAMES): void {
    const missing = queues.flatMap((q) => jobNamesOf(q).filter((j) => !this.handlers.has(`${q}/${j}`)).map((j) => `${q}/${j}`));
    const unknown = [...this.handlers.keys()].filter((k) => {
      const [q, j] = k.split('/');
      return !(QUEUE_NAMES as string[]).includes(q) || !jobNamesOf(q as QueueName).includes(j);
    });
    const problems = [
      ...missing.map((k) => `no handler for job ${k}`),
      ...this.duplicates.map((k) => `two handlers for job ${k}`),
      ...unknown.map((k) => `handler for unknown job ${k}`),
    ];
    if (problems.length) throw new Error(`Worker job registry is inconsistent: ${problems.join('; ')}`);
  }
}
