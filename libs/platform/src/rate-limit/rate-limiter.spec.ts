import { Config, loadConfig } from '../config';
import type { RedisClient } from '../redis';
import { RateLimiter } from './rate-limiter';

/** A RedisClient stand-in whose script call does what the test says. */
function limiter(status: string, gcra: () => Promise<number>) {
  const calls: string[] = [];
  const client = { redis: { status, defineCommand: () => undefined, tollgateGcra: (key: string, _i: number, _b: number, permits: number) => (calls.push(permits === 1 ? key : `${key} x${permits}`), gcra()) } } as unknown as RedisClient;
  const config = new Config(loadConfig({ RATE_LIMIT_PER_KEY_PER_SECOND: '10', RATE_LIMIT_REDIS_TIMEOUT_MS: '20', QUEUE_PREFIX: 'p' }));
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

  it('spends a granted lease locally: one Redis call for 50 requests', async () => {
    const { limiter: l, calls } = limiter('ready', async () => 0);
    for (let i = 0; i < 50; i++) expect(await l.take('key1')).toBe(0);
    expect(calls).toEqual(['p:rate:key1 x50']);
    await l.take('key1');
    expect(calls).toEqual(['p:rate:key1 x50', 'p:rate:key1 x50']);
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
