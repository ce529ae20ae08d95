import type { GuardCheckRequest, GuardCheckResponse, TollgateGuardClient } from './guard-client';

// Used when a busy answer carries no usable retryAfterMs, so that the retries never spin.
const FALLBACK_MS = 100;
// No single wait longer than this, whatever the answer asks (the deadline usually ends it first).
const MAX_MS = 60_000;

/** Whether Tollgate turned the check away under load (nothing evaluated, nothing reserved). */
export function isBusy(response: GuardCheckResponse): boolean {
  return response.decision === 'deny' && response.reason === 'busy';
}

/**
 * Wait before retrying a busy answer: "equal jitter" whose fixed half is the answer's
 * `retryAfterMs`, so a retry never comes before Tollgate expects to serve it, and whose random
 * half (up to as much again) spreads out the callers it turned away together.
 *
 * @param random uniform in [0, 1)
 * @returns milliseconds in [retryAfterMs, 2 × retryAfterMs)
 */
export function busyRetryDelay(retryAfterMs: number | undefined, random: () => number): number {
  const base =
    typeof retryAfterMs === 'number' && Number.isFinite(retryAfterMs) && retryAfterMs > 0
      ? Math.min(retryAfterMs, MAX_MS)
      : FALLBACK_MS;
  return Math.round(base + random() * base);
}

/** The answer {@link checkUntilServed} ended with, and how long it took. */
export interface ServedCheck {
  response: GuardCheckResponse;
  /** From the first attempt to the last answer. */
  elapsedMs: number;
}

/**
 * `client.guard.check(request)`, sending the same request again (same `stepId`, so a reservation
 * is never taken twice) while the answer is busy and the next retry would start within
 * `deadlineMs` of the first attempt. Returns the last answer, busy or not; a client error
 * propagates. The client is told what is left of the deadline, so one that retries busy answers
 * itself (the SDK) stops where this loop would.
 */
export async function checkUntilServed(
  client: TollgateGuardClient,
  request: GuardCheckRequest,
  deadlineMs: number,
  random: () => number = Math.random,
): Promise<ServedCheck> {
  const startedAt = Date.now();
  for (;;) {
    const busyDeadlineMs = Math.max(0, startedAt + deadlineMs - Date.now());
    const response = await client.guard.check(request, { busyDeadlineMs });
    if (!isBusy(response)) return { response, elapsedMs: Date.now() - startedAt };
    const delay = busyRetryDelay(response.retryAfterMs, random);
    if (Date.now() + delay - startedAt > deadlineMs) return { response, elapsedMs: Date.now() - startedAt };
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}
