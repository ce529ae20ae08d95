/**
 * Codes a {@link TollgateError} can carry: the service's own codes (`validation_failed`,
 * `unauthorized`, `forbidden`, `not_found`, `rate_limited`, `unavailable`, …) plus the ones the
 * client raises itself before or instead of a response.
 */
export type TollgateErrorCode =
  | 'validation_failed'
  | 'invalid_json'
  | 'unsupported_media_type'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'payload_too_large'
  | 'rate_limited'
  | 'unavailable'
  | 'internal'
  /** No answer within `timeoutMs`. */
  | 'timeout'
  /** The request never reached the service (DNS, refused connection, reset). */
  | 'network_error'
  /** The service answered something that is not the documented JSON. */
  | 'bad_response'
  /** The client was shut down. */
  | 'client_closed'
  | (string & {});

/**
 * The one error type of the SDK. `code` says what went wrong, `field` where (a path such as
 * `usage.inputTokens`), `status` the HTTP status when the service answered; the message says
 * what to fix.
 */
export class TollgateError extends Error {
  /** HTTP status of the service's answer; undefined when the error arose in the client. */
  readonly status: number | undefined;
  /** Stable machine-readable code. */
  readonly code: TollgateErrorCode;
  /** The field to fix, when the error is about one field of the input. */
  readonly field: string | undefined;
  /** Seconds the service asked to wait (`Retry-After`), when it did. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    message: string,
    options: { code: TollgateErrorCode; status?: number; field?: string; retryAfterSeconds?: number; cause?: unknown },
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'TollgateError';
    this.code = options.code;
    this.status = options.status;
    this.field = options.field;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /**
   * True when the same request may succeed later: network errors, timeouts, 429 and 5xx.
   * A 4xx other than 429 is final: retrying it cannot help.
   */
  get retryable(): boolean {
    if (this.code === 'network_error' || this.code === 'timeout') return true;
    if (this.status === undefined) return false;
    return this.status === 429 || this.status >= 500;
  }
}
