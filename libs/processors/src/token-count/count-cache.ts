/**
 * A bounded least-recently-used map from message id to its last token count and the content
 * version that count was made for.
 *
 * Keyed by id rather than by object because Mastra reloads a thread's history as new objects on
 * every run: an id key lets the counts made during one run serve the next run of the same thread.
 */
export class TokenCountCache {
  private readonly entries = new Map<string, { version: string; tokens: number }>();

  /**
   * @param maxEntries - Entries kept before the least recently used is evicted. The default holds a
   *   few long threads' histories in a few megabytes.
   */
  constructor(readonly maxEntries = 50_000) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError('TokenCountCache maxEntries must be a positive integer');
  }

  /** The cached count for `id`, if it was made for this exact content `version`. */
  get(id: string, version: string): number | undefined {
    const entry = this.entries.get(id);
    if (entry === undefined || entry.version !== version) return undefined;
    // Re-inserting moves the entry to the end of Map order, which is the LRU order.
    this.entries.delete(id);
    this.entries.set(id, entry);
    return entry.tokens;
  }

  /** Stores the count for `id` at content `version`, evicting the least recently used entry when full. */
  set(id: string, version: string, tokens: number): void {
    this.entries.delete(id);
    this.entries.set(id, { version, tokens });
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  /** Number of cached messages. */
  get size(): number {
    return this.entries.size;
  }
}
