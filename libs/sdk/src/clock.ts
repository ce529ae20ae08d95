/** A timer handle as returned by {@link Clock.setTimeout}. */
export type TimerHandle = unknown;

/**
 * Time as the client sees it. The default uses the global timers and unrefs them, so a pending
 * flush never keeps a process alive; tests pass a fake one (or use jest's fake timers, which
 * replace the globals this default reads at call time).
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /**
   * Runs `fn` once after `ms`. The timer must not keep the process alive unless `keepAlive`
   * (set while someone awaits `flush()` or `shutdown()`).
   */
  setTimeout(fn: () => void, ms: number, keepAlive?: boolean): TimerHandle;
  /** Cancels a timer from {@link Clock.setTimeout}. */
  clearTimeout(handle: TimerHandle): void;
}

/** The real clock, with unref'd timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms, keepAlive = false) {
    const t = setTimeout(fn, ms) as unknown as { unref?: () => void };
    if (!keepAlive && typeof t?.unref === 'function') t.unref();
    return t;
  },
  clearTimeout(handle) {
    clearTimeout(handle as Parameters<typeof clearTimeout>[0]);
  },
};

/** Resolves after `ms` on `clock`. */
export function sleep(clock: Clock, ms: number, keepAlive = false): Promise<void> {
  return new Promise((resolve) => clock.setTimeout(resolve, ms, keepAlive));
}
