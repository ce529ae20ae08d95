import { cloneUsage, emptyUsage, type UsageTotals } from '../../budgets/guard-decision';

/** The most commits a key that keeps missing waits before it is guessed again. */
const MAX_WAIT = 64;

/**
 * Per usage key of a project (a scope and window), the usage this process's last reserving commit
 * on it left, that commit's own reservations held; a key it never committed on is guessed empty —
 * a new run, thread or session holds nothing yet. A guess, never an answer: a check decided on it
 * is written only if the usage read under the scopes' locks, in the same statement, is within it
 * (see reserveInOneTripStatement), which makes any guess safe — one too low or too old only sends
 * the check the long way, decided on what it reads. Bounded: the keys least recently committed go
 * first.
 *
 * A guess that missed costs a round trip for nothing. A key guessed empty that held usage (made
 * before this process started, or by another replica) is known from the commit that follows. A
 * known key that keeps missing (a budget whose agents are spread over replicas, each committing
 * between the others' checks) is not guessed for its next 2, 4, … up to 64 commits after each
 * miss in a row, so the waste stays below one trip in 64 commits; a guess that holds clears it.
 */
export class KnownUsage {
  private readonly known = new Map<string, UsageTotals>();
  /** Per key that missed: misses in a row, and commits left before it is guessed again. */
  private readonly backoff = new Map<string, { misses: number; wait: number }>();

  constructor(private readonly maxKeys = 50_000) {}

  /**
   * The guess of each of `keys`, as copies the caller may change; undefined while one of them is
   * not guessed (it missed lately).
   */
  guess(projectId: string, keys: Iterable<string>): Map<string, UsageTotals> | undefined {
    const guess = new Map<string, UsageTotals>();
    for (const key of keys) {
      if (guess.has(key)) continue;
      const at = this.at(projectId, key);
      if (this.backoff.get(at)?.wait) return undefined;
      const usage = this.known.get(at);
      guess.set(key, usage ? cloneUsage(usage) : emptyUsage());
    }
    return guess;
  }

  /**
   * The usage of `keys` after a commit (a key `usage` does not hold is forgotten); `guessed`: the
   * commit was decided on their guesses, which held.
   */
  set(projectId: string, usage: ReadonlyMap<string, UsageTotals>, keys: Iterable<string>, guessed = false): void {
    for (const key of new Set(keys)) {
      const at = this.at(projectId, key);
      const waiting = this.backoff.get(at);
      if (guessed) this.backoff.delete(at);
      else if (waiting?.wait) waiting.wait -= 1;
      const u = usage.get(key);
      this.known.delete(at);
      if (u) this.known.set(at, cloneUsage(u));
    }
    while (this.known.size > this.maxKeys) this.known.delete(this.known.keys().next().value!);
    while (this.backoff.size > this.maxKeys) this.backoff.delete(this.backoff.keys().next().value!);
  }

  /**
   * The guesses of `keys` missed: their usage had grown past them. Each is forgotten; one that
   * was known is not guessed for a while, one guessed empty is known again from the next commit.
   */
  missed(projectId: string, keys: Iterable<string>): void {
    for (const key of new Set(keys)) {
      const at = this.at(projectId, key);
      if (!this.known.delete(at)) continue;
      const misses = (this.backoff.get(at)?.misses ?? 0) + 1;
      this.backoff.delete(at);
      this.backoff.set(at, { misses, wait: Math.min(2 ** misses, MAX_WAIT) });
    }
  }

  private at(projectId: string, key: string): string {
    return `${projectId}\u001f${key}`;
  }
}
