import { isIPv6 } from 'node:net';

/**
 * A failure allowance as GCRA (like the request limiter): `burst` failures at once, then one more
 * every `intervalMs`. A bucket's state is one number, the time its allowance is spent until.
 */
export interface FailureBucket {
  key: string;
  intervalMs: number;
  burst: number;
}

/**
 * The failure counts of this process: the fallback when Redis cannot be asked, so that an outage
 * of Redis leaves the throttle per process rather than off. Mirrors the Redis script exactly.
 */
export class LocalFailureCounts {
  private readonly spentUntil = new Map<string, number>();

  constructor(private readonly maxKeys = 100_000) {}

  /**
   * Milliseconds until one more failure fits in every bucket (0: it fits now). With `record`, a
   * failure that fits is counted in each bucket; one that does not is counted in none, so a
   * throttled client stays throttled at exactly the allowed rate, never longer.
   */
  attempt(buckets: FailureBucket[], nowMs: number, record: boolean): number {
    let wait = 0;
    const next = buckets.map((b) => {
      const spent = Math.max(this.spentUntil.get(b.key) ?? 0, nowMs) + b.intervalMs;
      wait = Math.max(wait, spent - b.burst * b.intervalMs - nowMs);
      return spent;
    });
    if (wait > 0) return Math.ceil(wait);
    if (record) {
      buckets.forEach((b, i) => this.spentUntil.set(b.key, next[i]));
      if (this.spentUntil.size > this.maxKeys) this.prune(nowMs);
    }
    return 0;
  }

  get size(): number {
    return this.spentUntil.size;
  }

  /** Forgets buckets that allow their whole burst again, then (a flood of new keys) the oldest. */
  private prune(nowMs: number): void {
    for (const [key, until] of this.spentUntil) if (until <= nowMs) this.spentUntil.delete(key);
    for (const key of this.spentUntil.keys()) {
      if (this.spentUntil.size <= this.maxKeys) break;
      this.spentUntil.delete(key);
    }
  }
}

/**
 * The address a client is counted under: an IPv4 address as is, an IPv6 address by its /64 (one
 * host is usually given a whole /64, so counting single addresses would not hold anyone back).
 */
export function addressBucket(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1];
  if (!isIPv6(ip)) return ip;
  const [head, tail = ''] = ip.split('%')[0].split('::');
  const left = head ? head.split(':') : [];
  const right = ip.includes('::') && tail ? tail.split(':') : [];
  // An embedded IPv4 tail only ever falls in the low 64 bits.
  const groups = [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
