import {
  estimateRequestSchema,
  guardCheckRequestSchema,
  type EstimateResponse,
  type GuardCheckRequestInput,
  type GuardCheckResponse,
} from '../../contracts/src/guard';
import { problemsOf } from '../../contracts/src/validation';
import { sleep, type Clock } from './clock';
import { TollgateError } from './errors';
import type { HttpTransport } from './http';

/** Timeout and retries of guard calls, which sit on the path of every LLM step. */
export interface GuardOptions {
  /** Per attempt. Default 5000 ms (above the service's own bound on a check, see `TollgateClientOptions.guard`). */
  timeoutMs: number;
  /** Further attempts on network errors, timeouts, 429 and 5xx. Default 1. */
  retries: number;
  /**
   * How long `check` keeps retrying answers with `reason: 'busy'`, in ms from its first attempt.
   * Default 10 000. Past it, the last busy answer is returned as it is (`deny`, `reason: 'busy'`),
   * whatever the request's `failMode`. 0 returns the first busy answer.
   */
  busyDeadlineMs: number;
}

/** Per-call settings of {@link GuardApi.check}. */
export interface GuardCheckOptions {
  /** Overrides {@link GuardOptions.busyDeadlineMs} for this call (for example, what is left of the caller's own deadline). */
  busyDeadlineMs?: number;
}

// Used when a busy answer carries no usable retryAfterMs, so that the retries never spin.
const BUSY_RETRY_FALLBACK_MS = 100;
// The same bound as a Retry-After is honoured up to.
const BUSY_RETRY_MAX_MS = 60_000;

/**
 * Wait before retrying a busy answer: "equal jitter" whose fixed half is the service's
 * `retryAfterMs`, so a retry never comes before the service expects to serve it, and whose random
 * half (up to as much again) spreads out the callers it turned away together.
 *
 * @param random uniform in [0, 1)
 * @returns milliseconds in [retryAfterMs, 2 × retryAfterMs)
 */
export function busyRetryDelay(retryAfterMs: number | undefined, random: () => number): number {
  const base =
    typeof retryAfterMs === 'number' && Number.isFinite(retryAfterMs) && retryAfterMs > 0
      ? Math.min(retryAfterMs, BUSY_RETRY_MAX_MS)
      : BUSY_RETRY_FALLBACK_MS;
  return Math.round(base + random() * base);
}

/** What `guard.release` answers. */
export interface GuardReleaseResponse {
  id?: string;
  status?: string;
  [key: string]: unknown;
}

/**
 * `client.guard`: asks the service whether a step may run within its budgets, and releases
 * reservations a step did not use.
 */
export class GuardApi {
  constructor(
    private readonly transport: HttpTransport,
    private readonly clock: Clock,
    private readonly options: GuardOptions,
    /** Uniform in [0, 1), for the jitter of busy retries (the transport's, so tests fix both). */
    private readonly random: () => number = Math.random,
  ) {}

  /**
   * `POST /v1/guard/check`.
   *
   * When the service answers `reason: 'busy'` (too many checks queued on one of the step's
   * scopes; nothing was reserved), the same request is sent again (same `stepId`, so a
   * reservation is never taken twice) after the answer's `retryAfterMs` plus jitter, for as long
   * as `busyDeadlineMs` allows; past it the last busy answer is returned as it is: `deny` with
   * `reason: 'busy'`. A busy service is up and shedding load, so `failMode` never applies to it.
   *
   * When the service cannot be reached, does not answer within the timeout, or answers 429/5xx
   * after the retries (on the first attempt or on a busy retry), the request's own `failMode`
   * decides (default `open`): the answer is then `allow` (open) or `deny` (closed) with `reason`
   * saying why. An invalid request or key still throws, since no retry or fallback can fix it.
   *
   * @throws {@link TollgateError} `validation_failed` naming the field, or the service's 4xx.
   */
  async check(request: GuardCheckRequestInput, options: GuardCheckOptions = {}): Promise<GuardCheckResponse> {
    const parsed = guardCheckRequestSchema.safeParse(request, { reportInput: true });
    if (!parsed.success) {
      const [first] = problemsOf(parsed.error);
      throw new TollgateError(`Invalid guard check: ${first.field} ${first.reason}`, {
        code: 'validation_failed',
        field: first.field,
      });
    }
    const busyDeadlineMs = options.busyDeadlineMs ?? this.options.busyDeadlineMs;
    if (typeof busyDeadlineMs !== 'number' || !Number.isFinite(busyDeadlineMs) || busyDeadlineMs < 0) {
      throw new TollgateError(
        `guard.check option busyDeadlineMs must be a number of milliseconds >= 0, got ${String(busyDeadlineMs)}`,
        { code: 'validation_failed', field: 'busyDeadlineMs' },
      );
    }
    // Serialized once: every busy retry sends the very same body.
    const body = JSON.stringify(parsed.data);
    const startedAt = this.clock.now();
    try {
      for (;;) {
        const response = await this.transport.request<GuardCheckResponse>({
          method: 'POST',
          path: '/v1/guard/check',
          body,
          timeoutMs: this.options.timeoutMs,
          retries: this.options.retries,
        });
        // Only a deny can be busy: an allow is returned as it is, whatever its reason says.
        if (response?.decision !== 'deny' || response.reason !== 'busy') return response;
        const delay = busyRetryDelay(response.retryAfterMs, this.random);
        if (this.clock.now() + delay - startedAt > busyDeadlineMs) return response;
        await sleep(this.clock, delay, true);
      }
    } catch (err) {
      if (!(err instanceof TollgateError) || !err.retryable) throw err;
      const failMode = parsed.data.failMode;
      return {
        decision: failMode === 'closed' ? 'deny' : 'allow',
        reason: `guard unavailable (${err.code}${err.status ? ` ${err.status}` : ''}): fail-${failMode} applied by the SDK; ${err.message}`,
        violations: [],
        warnings: [],
        skipped: [],
        usage: {},
        asOf: new Date(this.clock.now()).toISOString(),
      };
    }
  }

  /**
   * `POST /v1/estimate`: what a step would cost before making it — priced exactly as the guard
   * would reserve it (the input tokens times the margin for the provider's tokenizer). Give the
   * step's `inputTokens`, or its `messages` to have them counted with o200k.
   *
   * @throws {@link TollgateError} `validation_failed` naming the field, or when the service refuses or cannot be reached.
   */
  async estimate(request: {
    provider: string;
    model: string;
    inputTokens?: number;
    messages?: { role: string; content: string }[];
    maxOutputTokens: number;
  }): Promise<EstimateResponse> {
    const parsed = estimateRequestSchema.safeParse(request, { reportInput: true });
    if (!parsed.success) {
      const [first] = problemsOf(parsed.error);
      throw new TollgateError(`Invalid estimate: ${first.field} ${first.reason}`, {
        code: 'validation_failed',
        field: first.field,
      });
    }
    return this.transport.request<EstimateResponse>({
      method: 'POST',
      path: '/v1/estimate',
      body: parsed.data,
      timeoutMs: this.options.timeoutMs,
      retries: this.options.retries,
    });
  }

  /**
   * `POST /v1/guard/reservations/:id/release`: frees a reservation the step did not use (a step
   * event naming the reservation settles it instead; an unreleased reservation expires).
   *
   * @throws {@link TollgateError} when the service refuses or cannot be reached after the retries.
   */
  async release(reservationId: string): Promise<GuardReleaseResponse> {
    if (typeof reservationId !== 'string' || reservationId.length === 0) {
      throw new TollgateError('guard.release needs the reservation id from a check with reserve: true', {
        code: 'validation_failed',
        field: 'reservationId',
      });
    }
    return this.transport.request<GuardReleaseResponse>({
      method: 'POST',
      path: `/v1/guard/reservations/${encodeURIComponent(reservationId)}/release`,
      body: {},
      timeoutMs: this.options.timeoutMs,
      retries: this.options.retries,
    });
  }
}
