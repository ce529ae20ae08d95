import { GroupCommit, type GroupCommitOptions } from './group-commit';

/** A batch runner whose batches finish when the test says so. */
function harness(options: Partial<GroupCommitOptions> = {}) {
  const batches: { lane: string; items: string[]; finish: () => void; fail: (e: Error) => void }[] = [];
  const commits = new GroupCommit<string, string>(
    { maxBatch: 100, maxConcurrent: 2, maxPerLane: 2, maxWaitMs: 60_000, maxQueuedPerKey: 1000, ...options },
    (lane, items) =>
      new Promise((resolve, reject) => {
        batches.push({ lane, items, finish: () => resolve(items.map((i) => `done:${i}`)), fail: reject });
      }),
  );
  return { commits, batches };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('GroupCommit', () => {
  it('given one check, then it runs at once, alone', async () => {
    const { commits, batches } = harness();
    const answer = commits.submit('p', ['resource:r'], 'a');
    expect(batches.map((b) => b.items)).toEqual([['a']]);
    batches[0].finish();
    await expect(answer).resolves.toEqual({ kind: 'done', value: 'done:a' });
  });

  it('given checks queued on a busy key, then the next batch takes them all, in arrival order', async () => {
    const { commits, batches } = harness();
    const first = commits.submit('p', ['resource:r'], 'a');
    const rest = ['b', 'c', 'd'].map((x) => commits.submit('p', ['resource:r', `run:${x}`], x));
    expect(batches).toHaveLength(1);
    batches[0].finish();
    await first;
    await flush();
    expect(batches.map((b) => b.items)).toEqual([['a'], ['b', 'c', 'd']]);
    batches[1].finish();
    await expect(Promise.all(rest)).resolves.toEqual(
      ['b', 'c', 'd'].map((x) => ({ kind: 'done', value: `done:${x}` })),
    );
  });

  it('never lets a check overtake an earlier one that shares a key with it', async () => {
    const { commits, batches } = harness({ maxBatch: 1 });
    void commits.submit('p', ['resource:r'], 'a'); // runs
    void commits.submit('p', ['resource:r', 'user:u'], 'b'); // waits for r
    void commits.submit('p', ['user:u'], 'c'); // u is free, but b (earlier, on u) waits: c must too
    void commits.submit('p', ['thread:t'], 'd'); // unrelated: runs beside a
    expect(batches.map((b) => b.items)).toEqual([['a'], ['d']]);
    batches[0].finish();
    await flush();
    expect(batches.map((b) => b.items)).toEqual([['a'], ['d'], ['b']]);
    batches[2].finish();
    await flush();
    expect(batches.map((b) => b.items)).toEqual([['a'], ['d'], ['b'], ['c']]);
  });

  it("given one batch per project, then a project's checks on other budgets wait for its next batch, other projects' do not", async () => {
    const { commits, batches } = harness({ maxConcurrent: 4, maxPerLane: 1 });
    void commits.submit('p1', ['resource:a'], 'a');
    void commits.submit('p1', ['resource:b'], 'b');
    void commits.submit('p1', ['resource:c'], 'c');
    void commits.submit('p2', ['resource:x'], 'x');
    expect(batches.map((b) => [b.lane, b.items])).toEqual([
      ['p1', ['a']],
      ['p2', ['x']],
    ]);
    batches[0].finish();
    await flush();
    expect(batches.map((b) => [b.lane, b.items])).toEqual([
      ['p1', ['a']],
      ['p2', ['x']],
      ['p1', ['b', 'c']],
    ]);
  });

  it('keeps projects apart: a batch holds one project', async () => {
    const { commits, batches } = harness({ maxConcurrent: 1 });
    void commits.submit('p1', ['resource:r'], 'a');
    void commits.submit('p1', ['resource:x'], 'b');
    void commits.submit('p2', ['resource:r'], 'c');
    void commits.submit('p1', ['resource:y'], 'd');
    batches[0].finish();
    await flush();
    expect(batches.map((b) => [b.lane, b.items])).toEqual([
      ['p1', ['a']],
      ['p1', ['b', 'd']],
    ]);
  });

  it('answers busy at once past the queue bound of a key, with a retry hint', async () => {
    const { commits } = harness({ maxQueuedPerKey: 2 });
    void commits.submit('p', ['resource:r'], 'a'); // runs: no longer queued
    void commits.submit('p', ['resource:r'], 'b');
    void commits.submit('p', ['resource:r'], 'c');
    const busy = await commits.submit('p', ['resource:r'], 'd');
    expect(busy).toEqual({ kind: 'busy', retryAfterMs: expect.any(Number) });
    expect((busy as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
  });

  it('answers busy a check still queued after maxWaitMs, and never runs it', async () => {
    jest.useFakeTimers();
    try {
      const { commits, batches } = harness({ maxWaitMs: 100 });
      void commits.submit('p', ['resource:r'], 'a');
      const late = commits.submit('p', ['resource:r'], 'b');
      jest.advanceTimersByTime(101);
      await expect(late).resolves.toMatchObject({ kind: 'busy' });
      batches[0].finish();
      await Promise.resolve();
      await Promise.resolve();
      expect(batches.map((b) => b.items)).toEqual([['a']]);
      expect(commits.depth).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  it("given checks of a project that expired behind its batch, then the project's next batch still takes the ones left", async () => {
    jest.useFakeTimers();
    try {
      const { commits, batches } = harness({ maxWaitMs: 100, maxPerLane: 1 });
      void commits.submit('p', ['resource:a'], 'a'); // runs
      const expired = [commits.submit('p', ['resource:b'], 'b'), commits.submit('p', ['resource:c'], 'c')];
      jest.advanceTimersByTime(101);
      for (const e of expired) await expect(e).resolves.toMatchObject({ kind: 'busy' });
      void commits.submit('p', ['resource:d'], 'd'); // waits for a's batch, not for b and c
      void commits.submit('q', ['resource:x'], 'x'); // another project: at once
      expect(batches.map((b) => [b.lane, b.items])).toEqual([
        ['p', ['a']],
        ['q', ['x']],
      ]);
      batches[0].finish();
      await Promise.resolve();
      await Promise.resolve();
      expect(batches.map((b) => [b.lane, b.items])).toEqual([
        ['p', ['a']],
        ['q', ['x']],
        ['p', ['d']],
      ]);
      expect(commits.depth).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  it('once a check is in a batch, it gets what the batch did, however long it takes', async () => {
    jest.useFakeTimers();
    try {
      const { commits, batches } = harness({ maxWaitMs: 100 });
      const answer = commits.submit('p', ['resource:r'], 'a');
      jest.advanceTimersByTime(10_000);
      batches[0].finish();
      jest.useRealTimers();
      await expect(answer).resolves.toEqual({ kind: 'done', value: 'done:a' });
    } finally {
      jest.useRealTimers();
    }
  });

  it('fails every check of a failed batch, and goes on with the next', async () => {
    const { commits, batches } = harness();
    const a = commits.submit('p', ['resource:r'], 'a');
    const b = commits.submit('p', ['resource:r'], 'b');
    batches[0].fail(new Error('rolled back'));
    await expect(a).rejects.toThrow('rolled back');
    await flush();
    batches[1].finish();
    await expect(b).resolves.toEqual({ kind: 'done', value: 'done:b' });
  });
});
