/**
 * A bounded map from message id to its last token count and the content version that count was
 * made for, evicting the least recently used entry when full.
 *
 * Keyed by id rather than by object because Mastra reloads a thread's history as new objects on
 * every run: an id key lets the counts made during one run serve the next run of the same thread.
 *
 * Recency is tracked CLOCK-style: a hit only marks its entry, and eviction gives marked entries a
 * second chance (moving them to the young end) before evicting the oldest unmarked one. A hit
 * costs one map lookup, not a delete and re-insert, and what is evicted is still an entry not used
 * since it last reached the old end.
 */
export class TokenCountCache {
  private readonly entries = new Map<string, { version: string | number; tokens: number; used: boolean }>();
  /**
   * @param maxEntries - Entries kept before the least recently used is evicted. The default holds a
   *   few long threads' histories in a few megabytes.
   */
  constructor(readonly maxEntries = 50_000) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1)
      throw new RangeError('TokenCountCache maxEntries must be a positive integer');
  }

  /** The cached count for `id`, if it was made for this exact content `version`. */
  get(id: string, version: string | number): number | undefined {
    const entry = this.entries.get(id);
    if (entry === undefined || entry.version !== version) return undefined;
    entry.used = true;
    return entry.tokens;
  }

  /** Whether a count for `id` is held, at any content version. */
  has(id: string): boolean {
    return this.entries.has(id);
  }

  /** Stores the count for `id` at content `version`, evicting the least recently used entry when full. */
  set(id: string, version: string | number, tokens: number): void {
    this.entries.delete(id);
    this.entries.set(id, { version, tokens, used: false });
    while (this.entries.size > this.maxEntries) {
      const [oldest, entry] = this.entries.entries().next().value as [
        string,
        { version: string | number; tokens: number; used: boolean },
      ];
      this.entries.delete(oldest);
      if (entry.used && oldest !== id) {
        entry.used = false;
        this.entries.set(oldest, entry);
      }
    }
  }

  /** Number of cached messages. */
  get size(): number {
    return this.entries.size;
  }
}
