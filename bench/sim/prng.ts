/**
 * The simulator's only source of randomness. Each consumer (the world, the fault plan, each agent)
 * draws from its own stream, derived from the seed and a label, so that one agent's choices do
 * not depend on how the agents' requests interleaved: a seed replays the same workload shape.
 */

/** mulberry32: a 32-bit state, enough for a workload's choices, and the same on every platform. */
function mulberry32(state: number): () => number {
  let a = state >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a over `<seed>:<label>`, then murmur3's finalizer: a stream per (seed, label). */
function streamState(seed: number, label: string): number {
  let h = 0x811c9dc5;
  for (const ch of `${seed}:${label}`) {
    h ^= ch.charCodeAt(0);
    h = Math.imul(h, 0x01000193);
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

export class Random {
  private readonly next: () => number;

  constructor(seed: number, label: string) {
    this.next = mulberry32(streamState(seed, label));
  }

  /** [0, 1). */
  float(): number {
    return this.next();
  }

  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  between(lo: number, hi: number): number {
    return lo + this.next() * (hi - lo);
  }

  /** Spread over orders of magnitude: a budget of 0.2 is as likely as one of 2. */
  logBetween(lo: number, hi: number): number {
    return Math.exp(this.between(Math.log(lo), Math.log(hi)));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.next() * xs.length)];
  }

  /** One of the keys, each with its weight. */
  weighted<K extends string>(weights: Record<K, number>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((s, [, w]) => s + w, 0);
    let x = this.next() * total;
    for (const [k, w] of entries) {
      x -= w;
      if (x < 0) return k;
    }
    return entries[entries.length - 1][0];
  }
}
