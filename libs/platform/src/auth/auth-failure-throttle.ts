import { Injectable, Logger } from '@nestjs/common';
import { Config } from '../config';
import { RedisClient } from '../redis';
import { addressBucket, LocalFailureCounts, type FailureBucket } from './failure-counts';

/**
 * LocalFailureCounts.attempt in Redis, over every bucket of KEYS at once (on Redis's clock, so
 * that replicas agree). ARGV: record (1/0), then interval ms and burst per key.
 */
const ATTEMPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local wait = 0
local spent = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[i * 2])
  local burst = tonumber(ARGV[i * 2 + 1])
  local s = tonumber(redis.call('GET', key) or '0')
  if s < now then s = now end
  s = s + interval
  spent[i] = s
  if s - burst * interval - now > wait then wait = s - burst * interval - now end
end
if wait > 0 then return math.ceil(wait) end
if ARGV[1] == '1' then
  for i, key in ipairs(KEYS) do
    redis.call('SET', key, string.format('%.0f', spent[i]), 'PX', math.ceil(spent[i] - now) + 1)
  end
end
return 0
`;

type WithAttempt = { tollgateAuthFailures(...args: (string | number)[]): Promise<number> };

/**
 * Throttles failed authentication per client address and per key id, counted in Redis so that the
 * limit holds summed over API replicas. Only failures are counted, and only after a credential
 * failed: a valid key never waits on it. When Redis is down or slow, failures are counted in this
 * process instead (logged), so the throttle degrades to per replica, never to off.
 */
@Injectable()
export class AuthFailureThrottle {
  private readonly logger = new Logger('auth');
  private readonly local = new LocalFailureCounts();
  private readonly perAddress: { intervalMs: number; burst: number };
  private readonly perKey: { intervalMs: number; burst: number };
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private degraded = false;

  constructor(
    config: Config,
    private readonly client: RedisClient,
  ) {
    const v = config.values;
    this.perAddress = {
      intervalMs: v.AUTH_FAILURE_WINDOW_MS / v.AUTH_FAILURES_PER_ADDRESS,
      burst: v.AUTH_FAILURES_PER_ADDRESS,
    };
    this.perKey = { intervalMs: v.AUTH_FAILURE_WINDOW_MS / v.AUTH_FAILURES_PER_KEY, burst: v.AUTH_FAILURES_PER_KEY };
    this.prefix = `${v.QUEUE_PREFIX}:authfail:`;
    // Only failing requests wait on this, so it may take longer than the request limiter's.
    this.timeoutMs = Math.max(250, v.RATE_LIMIT_REDIS_TIMEOUT_MS);
    client.redis.defineCommand('tollgateAuthFailures', { lua: ATTEMPT });
  }

  /**
   * For a secret the operator chose (the admin or metrics token), asked before comparing it: the
   * milliseconds `address` must wait before its next attempt is even compared, else 0. Counts nothing.
   */
  throttled(address: string): Promise<number> {
    return this.attempt([this.addressBucket(address)], false);
  }

  /**
   * Counts a failed authentication against `address` and, for a key that exists, its id. Answers
   * 0 when the failure was within the allowance (answer 401), else the milliseconds to wait (429).
   */
  failed(address: string, keyId?: string): Promise<number> {
    const buckets = [this.addressBucket(address)];
    if (keyId) buckets.push({ key: `${this.prefix}k:${keyId}`, ...this.perKey });
    return this.attempt(buckets, true);
  }

  private addressBucket(address: string): FailureBucket {
    return { key: `${this.prefix}a:${addressBucket(address)}`, ...this.perAddress };
  }

  private async attempt(buckets: FailureBucket[], record: boolean): Promise<number> {
    const redis = this.client.redis;
    // Known to be down: this process's counts at once, until the connection is ready again.
    if (this.degraded && redis.status !== 'ready') return this.local.attempt(buckets, Date.now(), record);
    const args = [
      buckets.length,
      ...buckets.map((b) => b.key),
      record ? 1 : 0,
      ...buckets.flatMap((b) => [b.intervalMs, b.burst]),
    ];
    let timer: NodeJS.Timeout | undefined;
    let onReady: (() => void) | undefined;
    try {
      const timeout = new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs)),
      );
      // Commands fail at once while the connection is (re)established (no offline queue): wait for it within the budget.
      const ready =
        redis.status === 'ready' ? undefined : new Promise<void>((resolve) => redis.once('ready', (onReady = resolve)));
      const call = ready
        ? ready.then(() => (redis as unknown as WithAttempt).tollgateAuthFailures(...args))
        : (redis as unknown as WithAttempt).tollgateAuthFailures(...args);
      const wait = Number(await Promise.race([call, timeout]));
      if (this.degraded) {
        this.degraded = false;
        this.logger.log('Redis answers again: failed authentications are counted across replicas again');
      }
      return wait;
    } catch (err) {
      this.degrade(err);
      return this.local.attempt(buckets, Date.now(), record);
    } finally {
      clearTimeout(timer);
      if (onReady) redis.off('ready', onReady);
    }
  }

  private degrade(err: unknown): void {
    if (this.degraded) return;
    this.degraded = true;
    this.logger.warn(
      `Failed authentications are counted in this process only (Redis: ${err instanceof Error ? err.message : String(err)})`,
    );
  }
}
