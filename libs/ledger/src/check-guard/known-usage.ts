import { cloneUsage, type UsageTotals } from './guard-decision';

/** The most commits a shape that keeps missing waits before it is guessed again. */
const MAX_WAIT = 64;

/**
 * Per read shape (a project and the (scope, window) pairs a check reads), the usage this process
 * last committed a reserving check on, with that check's own reservation held. A guess, never an
 * answer: a check decided on it is written only if the usage read under the scopes' locks, in
 * the same statement, is within it (see reserveInOneTripStatement), which makes any guess safe
 * — one too low or too old only sends the check the long way, decided on what it reads.
 * Bounded: the shapes least recently committed go first.
 *
 * A guess that missed costs a round trip for nothing. Where it keeps missing (a budget whose
 * agents are spread over replicas, each committing between the others' checks), a shape is not
 * guessed for its next 2, 4, … up to 64 commits after each miss in a row, so the waste stays
 * below one trip in 64 commits; a guess that holds clears it.
 */
export class KnownUsage {
  private readonly known = new Map<string, ReadonlyMap<string, UsageTotals>>();
  /** Per shape that missed: misses in a row, and commits left before it is guessed again. */
  private readonly backoff = new Map<string, { misses: number; wait: number }>();

  constructor(private readonly maxShapes = 10_000) {}

  /** A copy the caller may change, or undefined (unknown, or backing off after misses). */
  get(shape: string): Map<string, UsageTotals> | undefined {
    if (this.backoff.get(shape)?.wait) return undefined;
    const usage = this.known.get(shape);
    return usage && new Map([...usage].map(([k, u]) => [k, cloneUsage(u)]));
  }

  /**
   * The usage of `keys` after a commit (keys it does not hold are left out: no guess for them);
   * `guessed`: the commit was decided on this shape's guess, which held.
   */
  set(
    shape: string,
    usage: ReadonlyMap<string, UsageTotals>,
    keys: Iterable<string> = usage.keys(),
    guessed = false,
  ): void {
    const waiting = this.backoff.get(shape);
    if (guessed) this.backoff.delete(shape);
    else if (waiting?.wait) waiting.wait -= 1;
    const kept = new Map<string, UsageTotals>();
    for (const k of keys) {
      const u = usage.get(k);
      if (!u) return void this.known.delete(shape);
      kept.set(k, cloneUsage(u));
    }
    this.known.delete(shape);
    this.known.set(shape, kept);
    while (this.known.size > this.maxShapes) this.known.delete(this.known.keys().next().value!);
    while (this.backoff.size > this.maxShapes) this.backoff.delete(this.backoff.keys().next().value!);
  }

  /** A guess of this shape missed: the usage had grown. Forgotten, and not guessed for a while. */
  missed(shape: string): void {
    this.known.delete(shape);
    const misses = (this.backoff.get(shape)?.misses ?? 0) + 1;
    this.backoff.delete(shape);
    this.backoff.set(shape, { misses, wait: Math.min(2 ** misses, MAX_WAIT) });
  }
}
