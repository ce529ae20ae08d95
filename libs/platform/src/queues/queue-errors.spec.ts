import { Queue } from 'bullmq';
import { endOpeningConnections } from './queue-errors';

/**
 * The errors a queue's connection emits with no one listening — each would be thrown from the
 * connection's opening, an unhandled rejection — recorded here instead of thrown.
 */
function unheardErrorsOf(queue: Queue): unknown[] {
  const unheard: unknown[] = [];
  const connection = (queue as unknown as { connection: NodeJS.EventEmitter }).connection;
  const emit = connection.emit.bind(connection);
  connection.emit = (event: string | symbol, ...args: unknown[]) => {
    if (event !== 'error' || connection.listenerCount('error') > 0) return emit(event, ...args);
    unheard.push(args[0]);
    return false;
  };
  return unheard;
}

/**
 * A queue whose Redis refuses connections, caught in the middle of an attempt: after one failed,
 * once the next has started (between the retry timer and the refusal, which comes with the next
 * poll for I/O). `heard` collects the errors its listener gets.
 */
async function queueMidAttempt(heard: Error[], status = 'connecting'): Promise<Queue> {
  const queue = new Queue('mid-attempt', {
    connection: { host: '127.0.0.1', port: 1, maxRetriesPerRequest: null, retryStrategy: () => 20 },
  });
  queue.on('error', (err) => heard.push(err));
  const client = (queue as unknown as { connection: { _client: { status: string } } }).connection._client;
  await new Promise<void>((resolve) => {
    const poll = () => (heard.length && client.status === status ? resolve() : setImmediate(poll));
    poll();
  });
  return queue;
}

/** Time for an ended connection's events to have been emitted. */
const settled = () => new Promise((r) => setTimeout(r, 100));

describe('stopping while Redis is unreachable (given a queue caught in the middle of a connection attempt)', () => {
  it('BullMQ alone: closing it leaves the attempt to fail unheard, as an unhandled rejection', async () => {
    const queue = await queueMidAttempt([]);
    const unheard = unheardErrorsOf(queue);
    await queue.close();
    await settled();
    expect(unheard.map((e) => (e as Error).message)).toEqual(['connect ECONNREFUSED 127.0.0.1:1']);
  });

  it('when its opening connections are ended first, then closed: nothing unheard, the failure heard', async () => {
    const heard: Error[] = [];
    const queue = await queueMidAttempt(heard);
    const unheard = unheardErrorsOf(queue);
    const before = heard.length;
    await endOpeningConnections([queue]);
    expect(heard.length).toBe(before + 1);
    await queue.close();
    await settled();
    expect(unheard).toEqual([]);
  });

  it('caught waiting to retry instead: the retry is cancelled, nothing waited for, nothing unheard', async () => {
    const heard: Error[] = [];
    const queue = await queueMidAttempt(heard, 'reconnecting');
    const unheard = unheardErrorsOf(queue);
    const started = Date.now();
    await endOpeningConnections([queue]);
    expect(Date.now() - started).toBeLessThan(500);
    await queue.close();
    await settled();
    expect(unheard).toEqual([]);
  });

  it('leaves an open connection alone', async () => {
    const queue = new Queue('open', { connection: { host: '127.0.0.1', port: 6379, maxRetriesPerRequest: null } });
    try {
      await queue.waitUntilReady();
      await endOpeningConnections([queue]);
      expect(await queue.getJobCounts('waiting')).toMatchObject({ waiting: 0 });
    } finally {
      await queue.close();
    }
  });
});
