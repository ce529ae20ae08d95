/** A delivery failed; `permanent` when a retry cannot change the outcome. `message` is what the tenant sees. */
export class SinkError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
    readonly status?: number,
    /** From a Retry-After header, when the sink sent one. */
    readonly retryAfterMs?: number,
    /** The cause, for the worker's log only: never stored nor shown to the tenant. */
    readonly detail?: string,
  ) {
    super(message);
  }
}

/** 408 and 429 mean "later"; any other 4xx (and 3xx: redirects are not followed) will not change on retry. */
export function isPermanentStatus(status: number): boolean {
  return status >= 300 && status < 500 && status !== 408 && status !== 429;
}

/**
 * Exponential backoff with "equal jitter": half the doubled delay is fixed, half random, so
 * batches of many exporters failing together do not retry in lockstep. Capped at maxMs; a
 * sink's Retry-After is honoured up to the cap.
 */
export function backoffMs(
  attemptsMade: number,
  initialMs: number,
  maxMs: number,
  random = Math.random,
  retryAfter?: number,
): number {
  const exp = Math.min(maxMs, initialMs * 2 ** Math.max(0, attemptsMade - 1));
  const jittered = exp / 2 + random() * (exp / 2);
  return Math.round(Math.min(maxMs, Math.max(jittered, retryAfter ?? 0)));
}
