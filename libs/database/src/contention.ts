/**
 * PostgreSQL's answers to contention rather than to a fault: the victim of a deadlock (40P01) and
 * a serialization failure (40001). Either rolled the whole transaction back, so running it again
 * from the start is safe and is what the caller would do.
 */
export const isContention = (err: unknown): boolean =>
  ['40P01', '40001'].includes((err as { code?: string } | undefined)?.code ?? '');

/** How many times a transaction is run before its contention is answered as load (busy). */
export const CONTENTION_ATTEMPTS = 4;

/**
 * Runs `work` (one whole transaction, or one autocommitted statement) again when PostgreSQL
 * rolled it back for contention, a bounded number of times with a short random pause, so two
 * victims do not collide again in step. The last failure is thrown: the caller answers busy.
 */
export async function retryOnContention<T>(work: () => Promise<T>, attempts = CONTENTION_ATTEMPTS): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (!isContention(err) || attempt >= attempts) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * 2 ** attempt));
    }
  }
}
