import { cloneUsage, type UsageTotals } from './guard-decision';

/**
 * Per read shape (a project and the (scope, window) pairs a check reads), the usage this process
 * last committed a reserving check on, with that check's own reservation held. A guess, never an
 * answer: a check decided on it is written only if the usage read under the scopes' locks, in
 * the same statement, is within it (see reserveInOneTripStatement), which makes any guess safe
 * — one too low or too old only sends the check the long way, decided on what it reads.
 * Bounded: the shapes least recently committed go first.
 */
export class KnownUsage {
  private readonly known = new Map<string, ReadonlyMap<string, UsageTotals>>();

  constructor(private readonly maxShapes = 10_000) {}

  /** A copy the caller may change, or undefined. */
  get(shape: string): Map<string, UsageTotals> | undefined {
    const usage = this.known.get(shape);
    return usage && new Map([...usage].map(([k, u]) => [k, cloneUsage(u)]));
  }

  /** The usage of `keys` after a commit (keys it does not hold are left out: no guess for them). */
  set(shape: string, usage: ReadonlyMap<string, UsageTotals>, keys: Iterable<string> = usage.keys()): void {
    const kept = new Map<string, UsageTotals>();
    for (const k of keys) {
      const u = usage.get(k);
      if (!u) return void this.known.delete(shape);
      kept.set(k, cloneUsage(u));
    }
    this.known.delete(shape);
    this.known.set(shape, kept);
    while (this.known.size > this.maxShapes) this.known.delete(this.known.keys().next().value!);
  }

  forget(shape: string): void {
    this.known.delete(shape);
  }
}
