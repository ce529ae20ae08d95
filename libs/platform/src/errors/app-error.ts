/** The codes clients see, each with its HTTP status; the one place that maps the two. */
export const ERROR_STATUS = {
  validation_failed: 400,
  invalid_json: 400,
  unsupported_media_type: 415,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  unavailable: 503,
  /** The operator has not configured what the request needs (e.g. TOLLGATE_SECRET_KEY). */
  not_configured: 501,
  internal: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** An error a client can act on: what went wrong (code), where (field) and what to fix (message). */
export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly field?: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }

  static validation(field: string, reason: string): AppError {
    return new AppError('validation_failed', `${field} ${reason}`, field);
  }
}
