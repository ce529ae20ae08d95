/**
 * A promise that rejects `ms` after it was made — but only after the I/O that became ready in the
 * meantime was handled. When the event loop is busy (a burst of large batches being parsed), the
 * timer and a dependency's long-arrived answer are due together, and timers run first: a plain
 * timeout would call a healthy dependency down. setImmediate runs after the loop's I/O phase, so the
 * answer, if it is there, settles the race first.
 */
export function deadline(ms: number): { expired: Promise<never>; clear(): void } {
  let timer: NodeJS.Timeout | undefined;
  let immediate: NodeJS.Immediate | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => (immediate = setImmediate(() => reject(new Error(`no answer within ${ms} ms`)))), ms);
  });
  expired.catch(() => undefined);
  return {
    expired,
    clear: () => {
      clearTimeout(timer);
      if (immediate) clearImmediate(immediate);
    },
  };
}
