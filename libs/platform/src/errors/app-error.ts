import { z } from 'zod';

/** The codes clients see, each with its HTTP status; the one place that maps the two. */
export const ERROR_STATUS = {
  validation_failed: 400,
  invalid_json: 400,
  unsupported_media_type: 415,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  /** The request's headers and body did not all arrive within HTTP_REQUEST_TIMEOUT_MS. */
  request_timeout: 408,
  conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  headers_too_large: 431,
  unavailable: 503,
  /** The operator has not configured what the request needs (e.g. TOLLGATE_SECRET_KEY). */
  not_configured: 501,
  internal: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** The body of every error answer, whatever answers it (a route, the filter, the HTTP server). */
export const errorResponseSchema = z
  .strictObject({
    statusCode: z.number().int().describe('The HTTP status, repeated'),
    code: z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]).describe('What went wrong; stable'),
    message: z.string().describe('What to fix, for a person'),
    field: z.string().optional().describe('Where: a field path such as `usage.inputTokens`, or `(body)`'),
  })
  .meta({ title: 'Error' });

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
