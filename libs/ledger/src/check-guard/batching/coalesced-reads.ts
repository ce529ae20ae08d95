/**
 * Lets concurrent identical reads share one statement without ever answering from a snapshot
 * older than the caller.
 *
 * A caller never joins a read already in flight: that read's snapshot may predate a step the caller
 * has just seen acknowledged, and the guard promises read-your-write. It joins the NEXT read of its
 * key instead, which starts once the one in flight has finished, so its snapshot is taken after
 * every caller in it arrived. With one agent a read starts at once, as before; with N agents
 * checking one budget, each statement answers all who arrived while the previous one ran.
 */
export class CoalescedReads<T> {
  private readonly keys = new Map<string, { running: Promise<T>; next?: Promise<T> }>();

  run(key: string, read: () => Promise<T>): Promise<T> {
    const state = this.keys.get(key);
    if (!state) return this.start(key, read);
    // Whoever queues first sets up the next read; the ones after it share it.
    state.next ??= state.running.then(
      () => this.start(key, read),
      () => this.start(key, read),
    );
    return state.next;
  }

  private start(key: string, read: () => Promise<T>): Promise<T> {
    const running = read();
    const state: { running: Promise<T>; next?: Promise<T> } = { running };
    this.keys.set(key, state);
    const done = () => {
      // The next read (if any) has replaced this state by now; only the last one cleans up.
      if (this.keys.get(key) === state) this.keys.delete(key);
    };
    running.then(done, done);
    return running;
  }
}
