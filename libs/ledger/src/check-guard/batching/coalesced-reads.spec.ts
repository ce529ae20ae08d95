import { CoalescedReads } from './coalesced-reads';

/** A read whose completion the test controls; each records the "snapshot" it would see. */
function controlledReads() {
  let clock = 0;
  const started: { snapshot: number; finish: (v?: unknown) => void; fail: (e: Error) => void }[] = [];
  const read = () =>
    new Promise<number>((resolve, reject) => {
      const snapshot = ++clock;
      started.push({ snapshot, finish: () => resolve(snapshot), fail: reject });
    });
  const arrive = () => ++clock;
  return { read, arrive, started };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('CoalescedReads', () => {
  it('starts a read at once when none is in flight', async () => {
    const reads = new CoalescedReads<number>();
    const { read, started } = controlledReads();
    const a = reads.run('k', read);
    expect(started).toHaveLength(1);
    started[0].finish();
    await expect(a).resolves.toBe(started[0].snapshot);
  });

  it('never answers a caller from a read that started before it arrived, and shares the next one', async () => {
    const reads = new CoalescedReads<number>();
    const { read, arrive, started } = controlledReads();
    const a = reads.run('k', read);
    const bArrived = arrive();
    const b = reads.run('k', read);
    const cArrived = arrive();
    const c = reads.run('k', read);
    expect(started).toHaveLength(1); // b and c wait for the read in flight to finish
    started[0].finish();
    await flush();
    expect(started).toHaveLength(2); // one more read, for both of them
    started[1].finish();
    const [ra, rb, rc] = await Promise.all([a, b, c]);
    expect(ra).toBe(started[0].snapshot);
    expect(rb).toBe(rc);
    expect(rb).toBeGreaterThan(bArrived);
    expect(rc).toBeGreaterThan(cArrived);
  });

  it('lets reads of different keys run together', async () => {
    const reads = new CoalescedReads<number>();
    const { read, started } = controlledReads();
    const x = reads.run('x', read);
    const y = reads.run('y', read);
    expect(started).toHaveLength(2);
    started.forEach((s) => s.finish());
    await expect(Promise.all([x, y])).resolves.toEqual([1, 2]);
  });

  it('gives a failed read to its callers only; those queued behind it get their own read', async () => {
    const reads = new CoalescedReads<number>();
    const { read, started } = controlledReads();
    const a = reads.run('k', read);
    const b = reads.run('k', read);
    started[0].fail(new Error('connection lost'));
    await expect(a).rejects.toThrow('connection lost');
    await flush();
    expect(started).toHaveLength(2);
    const c = reads.run('k', read); // arrives while b's read runs: waits for a third
    started[1].fail(new Error('timeout'));
    await expect(b).rejects.toThrow('timeout');
    await flush();
    started[2].finish();
    await expect(c).resolves.toBe(started[2].snapshot);
  });

  it('forgets a key once its reads are done: the next caller starts at once', async () => {
    const reads = new CoalescedReads<number>();
    const { read, started } = controlledReads();
    const a = reads.run('k', read);
    const b = reads.run('k', read);
    started[0].finish();
    await a;
    await flush();
    started[1].finish();
    await b;
    await flush();
    void reads.run('k', read); // left unfinished: only its start is asserted
    expect(started).toHaveLength(3);
  });
});
