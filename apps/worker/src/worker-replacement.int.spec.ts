import { randomBytes } from 'node:crypto';
import { Worker as Thread } from 'node:worker_threads';
import { TEST_REDIS_URL } from '../../../test/support/env';

/**
 * What WatchedWorker.replace relies on from BullMQ: a worker force-closed while it takes a job
 * scheduler's jobs stops, and its process goes on. BullMQ 5 retried the scheduling of the next
 * job on the closed connection with no delay for as long as the worker was closing — for ever, a
 * loop of promises that starved the event loop: the worker process stopped projecting and
 * exporting after a Redis restart made its watchdog replace a worker (test/faults).
 *
 * The replacements run in a thread of their own, so that a loop that never yields is seen (its
 * heartbeats stop) instead of freezing this test.
 */
const REPLACEMENTS = 300;

const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const { Queue, Worker } = require('bullmq');
const url = new URL(workerData.redisUrl);
const connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
const prefix = workerData.prefix;
setInterval(() => parentPort.postMessage({ beat: true }), 50);
(async () => {
  const queue = new Queue('replaced', { connection, prefix });
  await queue.upsertJobScheduler('tick', { every: 5 }, { name: 'tick', data: {} });
  for (let i = 0; i < workerData.replacements; i++) {
    const worker = new Worker('replaced', async () => undefined, { connection, prefix, concurrency: 1 });
    worker.on('error', () => undefined);
    await new Promise((r) => setTimeout(r, Math.random() * 30));
    worker.close(true).catch(() => undefined);
  }
  await queue.obliterate({ force: true });
  await queue.close();
  parentPort.postMessage({ done: true });
})().catch((err) => parentPort.postMessage({ failed: String(err) }));
`;

describe('a BullMQ worker replaced while it takes scheduled jobs (real Redis)', () => {
  it(`${REPLACEMENTS} force-closed workers later, the process still answers`, async () => {
    const thread = new Thread(THREAD, {
      eval: true,
      workerData: {
        redisUrl: TEST_REDIS_URL,
        prefix: `replaced-${randomBytes(4).toString('hex')}`,
        replacements: REPLACEMENTS,
      },
    });
    const outcome = await new Promise<string>((resolve) => {
      let lastBeat = Date.now();
      const watch = setInterval(() => {
        if (Date.now() - lastBeat > 3_000) resolve('stopped answering (a loop that never yields)');
      }, 250);
      thread.on('message', (m: { beat?: true; done?: true; failed?: string }) => {
        if (m.beat) lastBeat = Date.now();
        else resolve(m.done ? 'done' : `failed: ${m.failed}`);
      });
      thread.on('error', (err) => resolve(`threw: ${err.message}`));
      thread.once('exit', () => clearInterval(watch));
    }).finally(() => thread.terminate());
    expect(outcome).toBe('done');
  }, 60_000);
});
