import { Queue } from 'bullmq';

/**
 * The errors a queue's connection emits with no one listening — each would be thrown from the
 * connection's opening, an unhandled rejection — recorded here instead of thrown.
 */
function unheardErrorsOf(queue: Queue): unknown[] {
  const unheard: unknown[] = [];
  const connection = (queue as unknown as { backend: { connection: NodeJS.EventEmitter } }).backend.connection;
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
 *
 * That window is the host's TCP stack's to give: where a refusal comes back within the same poll,
 * it never opens. The queue is then closed, and the spec fails saying so, instead of timing out
 * with a queue that reconnects every 20 ms and keeps jest from exiting.
 */
async function queueMidAttempt(heard: Error[], status = 'connecting'): Promise<Queue> {
  const queue = new Queue('mid-attempt', {
    connection: { host: '127.0.0.1', port: 1, maxRetriesPerRequest: null, retryStrategy: () => 20 },
  });
  queue.on('error', (err) => heard.push(err));
  const client = (queue as unknown as { backend: { connection: { _client: { status: string } } } }).backend.connection
    ._client;
  const until = Date.now() + 5_000;
  const caught = await new Promise<boolean>((resolve) => {
    const poll = () => {
      if (heard.length && client.status === status) resolve(true);
      else if (Date.now() > until) resolve(false);
      else setImmediate(poll);
    };
    poll();
  });
  if (!caught) {
    await queue.close();
    throw new Error(`in 5 s of attempts, never saw the connection '${status}' after a failure (${heard.length} heard)`);
  }
  return queue;
}

/** Time for an ended connection's events to have been emitted. */
const settled = () => new Promise((r) => setTimeout(r, 100));

/**
 * What a service stopped while its Redis is unreachable relies on from BullMQ: a queue closed in
 * the middle of a connection attempt leaves no 'error' that nobody hears. BullMQ 5 dropped the
 * closing connection's listeners first, and the attempt then failed unheard — an unhandled
 * rejection ("connect ECONNREFUSED") that crashed the process on its way out; a service had to
 * wait for its connections and end them by hand before closing its queues.
 */
describe('stopping while Redis is unreachable (given a queue caught in the middle of a connection attempt)', () => {
  it('closing it leaves nothing unheard', async () => {
    const heard: Error[] = [];
    const queue = await queueMidAttempt(heard);
    const unheard = unheardErrorsOf(queue);
    await queue.close();
    await settled();
    expect(unheard).toEqual([]);
    expect(heard.length).toBeGreaterThan(0);
  });

  it('caught waiting to retry instead: closing it waits for no retry and leaves nothing unheard', async () => {
    const queue = await queueMidAttempt([], 'reconnecting');
    const unheard = unheardErrorsOf(queue);
    const started = Date.now();
    await queue.close();
    expect(Date.now() - started).toBeLessThan(500);
    await settled();
    expect(unheard).toEqual([]);
  });
});
