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
    expect(calls).toEqual(['p:rate:key1 x50', 'p:rate:key1 x50']);
  });

  it('spends a granted lease locally, and asks for the next one while half of it is left', async () => {
    const { limiter: l, calls } = limiter('ready', async () => 0);
    for (let i = 0; i < 24; i++) expect(await l.take('key1')).toBe(0);
    expect(calls).toEqual(['p:rate:key1 x50']); // one Redis call for these 24
    expect(await l.take('key1')).toBe(0); // 25 of 50 left: the next lease is asked for now
    expect(calls).toEqual(['p:rate:key1 x50', 'p:rate:key1 x50']);
    // 25 + 50 permits held: 49 more requests before the third lease, which again comes early.
    for (let i = 0; i < 49; i++) expect(await l.take('key1')).toBe(0);
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
    expect(calls).toEqual(['p:rate:key1 x50', 'p:rate:key1 x50']);
    const waiting = l.take('key1');
    answer(0);
    expect(await waiting).toBe(0);
    expect(calls).toHaveLength(2);
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
