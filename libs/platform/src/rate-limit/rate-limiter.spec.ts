import { Config, loadConfig } from '../config';
import type { RedisClient } from '../redis';
import { RateLimiter } from './rate-limiter';

/** A RedisClient stand-in whose script call does what the test says. */
function limiter(status: string, gcra: () => Promise<number>) {
  const calls: string[] = [];
  const client = {
    redis: {
      status,
      defineCommand: () => undefined,
      tollgateGcra: (key: string, _i: number, _b: number, permits: number) => (
        calls.push(permits === 1 ? key : `${key} x${permits}`),
        gcra()
      ),
    },
  } as unknown as RedisClient;
  const config = new Config(
    loadConfig({ RATE_LIMIT_PER_KEY_PER_SECOND: '10', RATE_LIMIT_REDIS_TIMEOUT_MS: '20', QUEUE_PREFIX: 'p' }),
  );
  return { limiter: new RateLimiter(config, client), calls };
}

describe('RateLimiter fails open', () => {
  it('passes the wait Redis answers', async () => {
    const { limiter: l, calls } = limiter('ready', async () => 1500);
    expect(await l.take('key1')).toBe(1500);
    // A lease of 50 permits is refused, then the single permit: that wait is the answer.
    expect(calls).toEqual(['p:rate:key1 x50', 'p:rate:key1']);
  });

  it('lets concurrent requests share one lease renewal instead of each taking a lease', async () => {
    const { limiter: l, calls } = limiter('ready', async () => 0);
    const waits = await Promise.all(Array.from({ length: 64 }, () => l.take('key1')));
    expect(waits.every((w) => w === 0)).toBe(true);
    // The second lease is twice the first: half of the first went in under 100 ms.
    expect(calls).toEqual(['p:rate:key1 x50', 'p:rate:key1 x100']);
  });

  it('spends a granted lease locally, and asks for the next one while half of it is left', async () => {
    const { limiter: l, calls } = limiter('ready', async () => 0);
    for (let i = 0; i < 24; i++) expect(await l.take('key1')).toBe(0);
    expect(calls).toEqual(['p:rate:key1 x50']); // one Redis call for these 24
    expect(await l.take('key1')).toBe(0); // 25 of 50 left: the next lease is asked for now
    expect(calls).toEqual(['p:rate:key1 x50', 'p:rate:key1 x100']);
    // 25 + 100 permits held: 74 more requests before the third lease, which again comes early.
    for (let i = 0; i < 74; i++) expect(await l.take('key1')).toBe(0);
    expect(calls).toHaveLength(2);
    await l.take('key1');
    expect(calls).toHaveLength(3);
  });

  it('never lets a busy key wait on Redis while it still holds permits', async () => {
    let answer!: (wait: number) => void;
    const { limiter: l, calls } = limiter('ready', () => new Promise<number>((resolve) => (answer = resolve)));
    const first = l.take('key1');
    answer(0);
    expect(await first).toBe(0);
    // The next renewal hangs: the 49 permits still held are spent without waiting for it.
    for (let i = 0; i < 49; i++) expect(await l.take('key1')).toBe(0);
    expect(calls).toEqual(['p:rate:key1 x50', 'p:rate:key1 x100']);
    const waiting = l.take('key1');
    answer(0);
    expect(await waiting).toBe(0);
    expect(calls).toHaveLength(2);
  });

  it("sizes a key's lease to its traffic: a quiet key keeps the first size, a busy one doubles up to a twentieth of the burst", async () => {
    jest.useFakeTimers();
    try {
      const { limiter: l, calls } = limiter('ready', async () => 0);
      // 10 requests a second: a lease lapses (after 1 s) long before half of it is spent, and the
      // next one is no larger.
      for (let i = 0; i < 60; i++) {
        expect(await l.take('quiet')).toBe(0);
        jest.advanceTimersByTime(100);
      }
      expect(calls).toEqual(Array.from({ length: 6 }, () => 'p:rate:quiet x50'));
      // All at once: each lease's first half goes in under 100 ms. The burst is 10,000: at most 500.
      // 1,500 requests in 7 Redis calls, where leases of 50 took one per 50.
      for (let i = 0; i < 1500; i++) expect(await l.take('busy')).toBe(0);
      expect(calls.slice(6)).toEqual(
        ['x50', 'x100', 'x200', 'x400', 'x500', 'x500', 'x500'].map((x) => `p:rate:busy ${x}`),
      );
      // A lease that lapsed unspent (the renewal in flight granted first): the key starts again at the first size.
      for (let i = 0; i < 10; i++) await Promise.resolve();
      jest.advanceTimersByTime(1001);
      await l.take('busy');
      expect(calls.at(-1)).toBe('p:rate:busy x50');
    } finally {
      jest.useRealTimers();
    }
  });

  it('lets the request through at once while Redis is not connected, without calling it', async () => {
    const { limiter: l, calls } = limiter('reconnecting', async () => 1500);
    expect(await l.take('key1')).toBe(0);
    expect(calls).toEqual([]);
  });

  it('lets the request through when Redis fails or does not answer within the timeout', async () => {
    expect(await limiter('ready', () => Promise.reject(new Error('READONLY'))).limiter.take('k')).toBe(0);
    expect(await limiter('ready', () => new Promise<number>(() => undefined)).limiter.take('k')).toBe(0);
  });
});
