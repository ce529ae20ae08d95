import { guardCheckRequestSchema, type GuardCheckRequestInput, type GuardCheckResponse } from '../../contracts/src/guard';
import { problemsOf } from '../../contracts/src/validation';
import type { Clock } from './clock';
import { TollgateError } from './errors';
import type { HttpTransport } from './http';

/** Timeout and retries of guard calls, which sit on the path of every LLM step. */
export interface GuardOptions {
  /** Per attempt. Default 2000 ms. */
  timeoutMs: number;
  /** Further attempts on network errors, timeouts, 429 and 5xx. Default 1. */
  retries: number;
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
  ) {}

  /**
   * `POST /v1/guard/check`. When the service cannot be reached, does not answer within the
   * timeout, or answers 429/5xx after the retries, the request's own `failMode` decides
   * (default `open`): the answer is then `allow` (open) or `deny` (closed) with `reason` saying
   * why. An invalid request or key still throws, since no retry or fallback can fix it.
   *
   * @throws {@link TollgateError} `validation_failed` naming the field, or the service's 4xx.
   */
  async check(request: GuardCheckRequestInput): Promise<GuardCheckResponse> {
    const parsed = guardCheckRequestSchema.safeParse(request, { reportInput: true });
    if (!parsed.success) {
      const [first] = problemsOf(parsed.error);
      throw new TollgateError(`Invalid guard check: ${first.field} ${first.reason}`, { code: 'validation_failed', field: first.field });
    }
    try {
      return await this.transport.request<GuardCheckResponse>({
        method: 'POST',
        path: '/v1/guard/check',
        body: parsed.data,
        timeoutMs: this.options.timeoutMs,
        retries: this.options.retries,
      });
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
   * `POST /v1/guard/reservations/:id/release`: frees a reservation the step did not use (a step
   * event naming the reservation settles it instead; an unreleased reservation expires).
   *
   * @throws {@link TollgateError} when the service refuses or cannot be reached after the retries.
   */
  async release(reservationId: string): Promise<GuardReleaseResponse> {
    if (typeof reservationId !== 'string' || reservationId.length === 0) {
      throw new TollgateError('guard.release needs the reservation id from a check with reserve: true', { code: 'validation_failed', field: 'reservationId' });
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
