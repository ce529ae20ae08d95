import { Injectable } from '@nestjs/common';
import { UnrecoverableError } from 'bullmq';
import { z } from 'zod';
import { jobNamesOf, QUEUE_NAMES, QUEUES, type JobName, type JobPayload, type QueueName } from './queues';

/** What a handler may need to know about the attempt (retry-aware handlers such as exporters). */
export interface JobAttempt {
  /** Attempts made before this one. */
  attemptsMade: number;
  /** Attempts allowed in all. */
  attempts: number;
  /** The BullMQ job id. */
  jobId?: string;
}

/** A job's handler: it receives the payload as its schema in QUEUES parsed it (defaults applied). */
export type JobHandler<Q extends QueueName = QueueName, J extends JobName<Q> = JobName<Q>> = (
  data: JobPayload<Q, J>,
  attempt: JobAttempt,
) => Promise<unknown>;

/** The part of a BullMQ job the router reads. */
export interface RoutedJob {
  name: string;
  data: unknown;
  id?: string;
  attemptsMade: number;
  opts: { attempts?: number };
}

/**
 * Handlers registered by the worker's features, by queue and job name, and the one router every
 * queue's processor calls. `assertComplete` is called at boot: a job named in QUEUES without a
 * handler (or with two) stops the worker right there, not when the first such job arrives.
 */
@Injectable()
export class JobHandlers {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly duplicates: string[] = [];

  register<Q extends QueueName, J extends JobName<Q>>(queue: Q, job: J, handler: JobHandler<Q, J>): void {
    const key = `${queue}/${job}`;
    if (this.handlers.has(key)) this.duplicates.push(key);
    this.handlers.set(key, handler as unknown as JobHandler);
  }

  /** A registered handler as it stands, for specs that call it directly (no parsing; a first attempt unless told). */
  get(queue: QueueName, job: string): ((data: unknown, attempt?: JobAttempt) => Promise<unknown>) | undefined {
    const handler = this.handlers.get(`${queue}/${job}`);
    return handler && ((data, attempt = { attemptsMade: 0, attempts: 1 }) => handler(data as never, attempt));
  }

  /**
   * Runs a job of `queue`: parses its payload with the job's schema and hands the parsed value to
   * its handler. A job that no schema names, or whose payload does not parse, fails with BullMQ's
   * UnrecoverableError: retrying cannot fix it, so it is failed at once instead of after every
   * backoff. (A producer of the same version cannot send one: `addJob` parses first; an older or
   * newer replica during a rolling deploy can.)
   */
  async route(queue: QueueName, job: RoutedJob): Promise<unknown> {
    const schema = (QUEUES[queue] as Record<string, z.ZodType>)[job.name];
    const handler = this.handlers.get(`${queue}/${job.name}`);
    if (!schema || !handler) throw new UnrecoverableError(`Queue ${queue} has no job named ${job.name}`);
    const parsed = schema.safeParse(job.data);
    if (!parsed.success)
      throw new UnrecoverableError(
        `Job ${queue}/${job.name} has a payload that does not parse: ${z.prettifyError(parsed.error).replace(/\n/g, '; ')}`,
      );
    return handler(parsed.data as never, {
      attemptsMade: job.attemptsMade,
      attempts: job.opts.attempts ?? 1,
      jobId: job.id,
    });
  }

  assertComplete(queues: readonly QueueName[] = QUEUE_NAMES): void {
    const missing = queues.flatMap((q) =>
      jobNamesOf(q)
        .filter((j) => !this.handlers.has(`${q}/${j}`))
        .map((j) => `${q}/${j}`),
    );
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
