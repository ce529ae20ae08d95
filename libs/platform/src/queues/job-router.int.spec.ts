import { Queue, QueueEvents, Worker } from 'bullmq';
import { randomUUID } from 'node:crypto';
import { TEST_REDIS_URL } from '../../../../test/support/env';
import { JobHandlers } from './job-handlers';

/** The router under a real BullMQ worker on the real Redis: what retries and what does not. */
describe('JobHandlers.route in a BullMQ worker (real Redis)', () => {
  const prefix = `test-router-${randomUUID()}`;
  const connection = { url: TEST_REDIS_URL, maxRetriesPerRequest: null };
  const handlers = new JobHandlers();
  const delivered: unknown[] = [];
  let flaky = 0;
  handlers.register('exports', 'export.deliver', async (data, attempt) => {
    delivered.push({ data, attempt });
    return 'ok';
  });
  handlers.register('exports', 'export.drain', async () => {
    if (flaky++ < 1) throw new Error('sink away');
    return 'drained';
  });
  const queue = new Queue('exports', { connection, prefix });
  const events = new QueueEvents('exports', { connection, prefix });
  const worker = new Worker('exports', (job) => handlers.route('exports', job), {
    connection,
    prefix,
    settings: { backoffStrategy: () => 10 },
  });
  beforeAll(() => Promise.all([worker.waitUntilReady(), events.waitUntilReady()]));
  afterAll(async () => {
    await worker.close();
    await events.close();
    await queue.obliterate({ force: true });
    await queue.close();
  });

  const finished = async (jobId: string) => {
    const job = (await queue.getJob(jobId))!;
    await job.waitUntilFinished(events).catch(() => undefined);
    return (await queue.getJob(jobId))!;
  };

  it('a payload that does not parse fails on its first attempt, whatever attempts it was given', async () => {
    const job = await queue.add(
      'export.deliver',
      { batchId: 'b1', exporterId: 'x1', maxBackoffMs: 'soon' },
      { attempts: 5, backoff: { type: 'custom' } },
    );
    const done = await finished(job.id!);
    expect(await done.getState()).toBe('failed');
    expect(done.attemptsMade).toBe(1);
    expect(done.failedReason).toMatch(
      /^Job exports\/export\.deliver has a payload that does not parse: .*maxBackoffMs/,
    );
    expect(delivered).toEqual([]);
  });

  it('a job whose handler throws is retried as usual; a good payload reaches its handler parsed', async () => {
    const drain = await queue.add('export.drain', { exporterId: 'x1' }, { attempts: 3, backoff: { type: 'custom' } });
    const drained = await finished(drain.id!);
    expect([await drained.getState(), drained.attemptsMade, drained.returnvalue]).toEqual(['completed', 2, 'drained']);
    const deliver = await queue.add(
      'export.deliver',
      { batchId: 'b2', exporterId: 'x1', maxBackoffMs: 1000 },
      { attempts: 2, jobId: 'deliver-b2' },
    );
    expect((await finished(deliver.id!)).returnvalue).toBe('ok');
    expect(delivered).toEqual([
      {
        data: { batchId: 'b2', exporterId: 'x1', maxBackoffMs: 1000, priorAttempts: 0 },
        attempt: { attemptsMade: 0, attempts: 2, jobId: 'deliver-b2' },
      },
    ]);
  });
});
