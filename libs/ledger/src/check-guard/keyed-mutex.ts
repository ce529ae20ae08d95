/**
 * Serializes work per key inside one process. The guard's real serialization is a PostgreSQL
 * advisory lock (it holds across API replicas); queueing here first means that N checks racing on
 * one scope wait in memory instead of each holding a pooled connection while blocked on the lock.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  /** Acquires every key, in sorted order (so two callers never wait on each other crosswise). */
  async acquire(keys: readonly string[]): Promise<() => void> {
    const releases: (() => void)[] = [];
    for (const key of [...new Set(keys)].sort()) {
      const previous = this.tails.get(key) ?? Promise.resolve();
      let release!: () => void;
      const mine = new Promise<void>((resolve) => (release = resolve));
      const tail = previous.then(() => mine);
      this.tails.set(key, tail);
      await previous;
      releases.push(() => {
        release();
        if (this.tails.get(key) === tail) this.tails.delete(key);
      });
    }
    return () => releases.reverse().forEach((r) => r());
  }
}
