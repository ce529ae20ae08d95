import { Injectable } from '@nestjs/common';
import { Config } from '../config';
import { counterPrefix, RedisClient } from '../redis';

/**
 * GCRA (a token bucket kept as one timestamp per key): the key's "theoretical arrival time" moves
 * one interval ahead per request; a request is refused while that time is more than `burst`
 * intervals ahead of now. Redis's own clock, so API replicas on different machines agree.
 * Answers 0 when the request may pass, otherwise the milliseconds to wait.
 */
const GCRA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3] or '1')
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local newTat = tat + n * interval
local wait = newTat - burst * interval - now
if wait > 0 then return math.max(1, math.ceil(wait / 1000)) end
redis.call('SET', KEYS[1], string.format('%.0f', newTat), 'PX', math.ceil((newTat - now) / 1000) + 1)
return 0
`;

/** Permits of one key held here: `size`, its latest lease's; `spent` since `since`, when that lease came. */
interface Lease {
  permits: number;
  size: number;
  until: number;
  spent: number;
  since: number;
}

type WithGcra = { tollgateGcra(key: string, intervalMicros: number, burst: number, permits: number): Promise<number> };

/** Permits taken from Redis at once and spent locally; unspent ones are dropped after this long. */
const LEASE_MS = 1000;
/** A busy key's lease covers about this much of its recent traffic (see RateLimiter.nextLease). */
const LEASE_COVERS_MS = 100;

/**
 * Per-key request limit shared by every API replica through Redis. Fails open: when Redis is down
 * or slower than RATE_LIMIT_REDIS_TIMEOUT_MS the request passes, because ingest must keep
 * committing to PostgreSQL without Redis.
 */
@Injectable()
export class RateLimiter {
  private readonly intervalMicros: number;
  private readonly burst: number;
  private readonly timeoutMs: number;
  private readonly prefix: string;
  /** How many permits one Redis call takes at first: 1 for small bursts (exact), up to 50 for large ones. */
  private readonly lease: number;
  /** The most one lease takes, however busy its key: a twentieth of the burst. */
  private readonly maxLease: number;
  private readonly leases = new Map<string, Lease>();
  /** One lease request in flight per key: concurrent requests wait for it instead of each taking 50. */
  private readonly leasing = new Map<string, Promise<boolean>>();

  constructor(
    config: Config,
    private readonly client: RedisClient,
  ) {
    const rate = config.values.RATE_LIMIT_PER_KEY_PER_SECOND;
    this.intervalMicros = rate > 0 ? 1e6 / rate : 0;
    this.burst = config.values.RATE_LIMIT_BURST;
    this.timeoutMs = config.values.RATE_LIMIT_REDIS_TIMEOUT_MS;
    // Not under the queues' hash tag: on a Redis Cluster the keys spread over the slots.
    this.prefix = `${counterPrefix(config.values)}:rate:`;
    // One Redis round trip per request would cost the guard's hot path more than the check itself;
    // a lease of permits (already counted in Redis, so replicas still share one limit) amortizes it.
    this.maxLease = Math.max(1, Math.floor(this.burst / 20));
    this.lease = Math.min(50, this.maxLease);
    client.redis.defineCommand('tollgateGcra', { numberOfKeys: 1, lua: GCRA });
  }

  /** Takes one request from `keyId`'s allowance; the milliseconds to wait when there is none, else 0. */
  async take(keyId: string): Promise<number> {
    if (this.intervalMicros === 0 || this.client.redis.status !== 'ready') return 0;
    for (;;) {
      const held = this.leases.get(keyId);
      if (held && held.permits > 0 && held.until > Date.now()) {
        held.permits -= 1;
        held.spent += 1;
        // A busy key asks for its next lease while half of this one is left, so its requests do
        // not queue behind a Redis round trip each time a lease runs out.
        if (held.permits <= held.size / 2 && !this.leasing.has(keyId)) void this.renew(keyId);
        return 0;
      }
      if (this.lease === 1) return this.call(keyId, 1);
      // Another request is renewing this key's lease: use it when it comes, or fall back to one permit.
      const renewal = this.leasing.get(keyId) ?? this.renew(keyId);
      if (!(await renewal)) return this.call(keyId, 1);
    }
  }

  /** Takes a lease of permits from Redis for `keyId` (one renewal in flight per key); true when granted. */
  private renew(keyId: string): Promise<boolean> {
    const size = this.nextLease(this.leases.get(keyId));
    const renewal = this.call(keyId, size).then((wait) => {
      this.leasing.delete(keyId);
      if (wait > 0) return false;
      const held = this.leases.get(keyId);
      const now = Date.now();
      const until = now + LEASE_MS;
      if (held && held.until > now)
        Object.assign(held, { permits: held.permits + size, size, until, spent: 0, since: now });
      else this.leases.set(keyId, { permits: size, size, until, spent: 0, since: now });
      return true;
    });
    this.leasing.set(keyId, renewal);
    return renewal;
  }

  /**
   * The size of a key's next lease. A key that spent its last lease's first half within
   * LEASE_COVERS_MS (busy: at 2,000 requests a second a lease of 50 lasts 25 ms) gets twice that
   * lease; otherwise about LEASE_COVERS_MS of what it spent since. Never less than the first
   * lease, nor more than a twentieth of the burst: what one replica may hold unspent, and lose
   * when its lease lapses. At 2,000 requests a second that is ten Redis calls a second, not forty.
   */
  private nextLease(held: Lease | undefined): number {
    const now = Date.now();
    if (!held || held.until <= now) return this.lease;
    const elapsed = now - held.since;
    const size = elapsed < LEASE_COVERS_MS ? held.size * 2 : Math.ceil((held.spent * LEASE_COVERS_MS) / elapsed);
    return Math.max(this.lease, Math.min(this.maxLease, size));
  }

  private async call(keyId: string, permits: number): Promise<number> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(0), this.timeoutMs)));
      const call = (this.client.redis as unknown as WithGcra)
        .tollgateGcra(this.prefix + keyId, this.intervalMicros, this.burst, permits)
        .catch(() => 0);
      return Number(await Promise.race([call, timeout]));
    } finally {
      clearTimeout(timer);
    }
  }
}
