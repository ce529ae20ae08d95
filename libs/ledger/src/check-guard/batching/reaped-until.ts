/**
 * Per scope, the time up to which this process's own committed guard outcomes took the scope's
 * expired holds out: no live hold of the scope expires at or before it (a hold is made to expire
 * a reservation TTL after it is made). Reads and reaps of the scope look only at holds expiring
 * after it, so the index entries of holds already taken out — settled, released, reaped, which
 * stay until VACUUM and may stay long with autovacuum off or late — are walked at most until the
 * scope's next reap, not on every check forever.
 *
 * Per process: another replica's reaps only make it more conservative, and a process that has
 * not reaped a scope yet reads all of the scope's expired holds, as before. A bound found too
 * late (a hold made by a replica whose clock runs more than a TTL behind) only ever counts that
 * hold a while longer, until the sweeper takes it out: it never lets a check spend more.
 */
export class ReapedUntil {
  private readonly until = new Map<string, number>();

  constructor(private readonly maxScopes = 100_000) {}

  /** The bound of a scope, -Infinity when this process has not reaped it. */
  of(projectId: string, scopeKey: string): number {
    return this.until.get(key(projectId, scopeKey)) ?? -Infinity;
  }

  /** After an outcome that took out `scopeKeys`' holds expired by `at` committed. */
  reaped(projectId: string, scopeKeys: readonly string[], at: number): void {
    for (const scopeKey of scopeKeys) {
      const k = key(projectId, scopeKey);
      const known = this.until.get(k) ?? -Infinity;
      // Kept in the order of use, so that the least recently reaped scope goes first.
      this.until.delete(k);
      this.until.set(k, Math.max(known, at));
    }
    while (this.until.size > this.maxScopes) this.until.delete(this.until.keys().next().value!);
  }
}

const key = (projectId: string, scopeKey: string) => `${projectId}\u001f${scopeKey}`;
