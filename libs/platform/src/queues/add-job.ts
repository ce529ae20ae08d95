import type { JobsOptions, Queue } from 'bullmq';
import type { z } from 'zod';
import { QUEUES, type JobName, type QueueName } from './queues';

/** What a producer passes for a job: its schema's input (fields with a default may be left out). */
export type JobInput<Q extends QueueName, J extends JobName<Q>> = (typeof QUEUES)[Q][J] extends z.ZodType
  ? z.input<(typeof QUEUES)[Q][J]>
  : never;

/**
 * Enqueues a job with its payload parsed by the same schema the worker parses it with: a
 * producer's mistake throws here, naming the field, instead of failing in the worker later.
 */
export async function addJob<Q extends QueueName, J extends JobName<Q>>(
  queue: Queue,
  queueName: Q,
  name: J,
  data: JobInput<Q, J>,
  opts?: JobsOptions,
): Promise<void> {
  if (queue.name !== queueName) throw new Error(`addJob: the queue given is ${queue.name}, not ${queueName}`);
  const schema = (QUEUES[queueName] as Record<string, z.ZodType>)[name];
  await queue.add(name, schema.parse(data), opts);
}
