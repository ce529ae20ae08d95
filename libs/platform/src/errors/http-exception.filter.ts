import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { isContention } from '@tollgate/database';
import { AppError, ERROR_STATUS, type ErrorCode } from './app-error';

/** PostgreSQL or Redis unreachable: the request may succeed if retried shortly. */
function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string; cause?: unknown; name?: string };
  if (!e) return false;
  const codes = [
    'ECONNREFUSED',
    'ECONNRESET',
    'ETIMEDOUT',
    'EPIPE',
    '57P01',
    '57P02',
    '57P03',
    '08000',
    '08003',
    '08006',
    '08001',
    '08004',
    'P1001',
    'P1017',
    'P2024',
  ];
  if (e.code && codes.includes(e.code)) return true;
  const msg = String(e.message ?? '');
  if (
    /timeout exceeded when trying to connect|Connection terminated|connect ECONNREFUSED|the database system is (starting up|shutting down)|terminating connection|Client has encountered a connection error|Can't reach database server|Transaction API error/i.test(
      msg,
    )
  )
    return true;
  return e.cause !== undefined && e.cause !== err ? isUnavailable(e.cause) : false;
}

/** Turns every failure into `{ statusCode, code, message, field? }`; 5xx never carry internals. */
@Catch()
export class HttpExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  catch(exception: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const { status, body, retryAfter } = this.describe(exception);
    // Only what we did not expect is an error with its stack (inside the JSON line): a client's
    // mistake (4xx), a feature the operator has not configured (501) and a backing service that is
    // down (503) are answered as such and logged by the request line only.
    if (status >= 500 && status !== 501 && status !== 503)
      this.logger.error({
        msg: 'unexpected error',
        err: exception instanceof Error ? exception : new Error(String(exception)),
      });
    if (retryAfter !== undefined) void reply.header('Retry-After', String(retryAfter));
    void reply.status(status).send(body);
  }

  private describe(exception: unknown): { status: number; body: Record<string, unknown>; retryAfter?: number } {
    if (exception instanceof AppError) {
      return {
        status: exception.status,
        body: {
          statusCode: exception.status,
          code: exception.code,
          message: exception.message,
          ...(exception.field ? { field: exception.field } : {}),
        },
        retryAfter: exception.retryAfterSeconds ?? (exception.code === 'unavailable' ? 1 : undefined),
      };
    }
    if (exception instanceof HttpException) {
      // Nest turns Fastify's own errors (body parsing, size, media type) into HttpExceptions.
      const status = exception.getStatus();
      const code: ErrorCode =
        status === 400 && /JSON|body cannot be empty/i.test(exception.message)
          ? 'invalid_json'
          : ((Object.entries(ERROR_STATUS).find(([, s]) => s === status)?.[0] ?? 'internal') as ErrorCode);
      const field =
        status === 415 ? { field: 'content-type' } : status === 400 || status === 413 ? { field: '(body)' } : {};
      return { status, body: { statusCode: status, code, message: exception.message, ...field } };
    }
    if (isBusy(exception)) {
      // Writers on the same budgets that PostgreSQL could not serve at once, even after the
      // transaction was run again: load, answered as load.
      return {
        status: 503,
        body: {
          statusCode: 503,
          code: 'unavailable',
          message: 'Busy: concurrent writes to the same budgets; retry after the Retry-After header',
        },
        retryAfter: 1,
      };
    }
    if (isUnavailable(exception)) {
      return {
        status: 503,
        body: { statusCode: 503, code: 'unavailable', message: 'A backing service is unavailable; retry shortly' },
        retryAfter: 1,
      };
    }
    return { status: 500, body: { statusCode: 500, code: 'internal', message: 'Internal error' } };
  }
}

/**
 * Load, not an outage: contention PostgreSQL still reported after the transaction was run again
 * (see retryOnContention), a lock wait past lock_timeout, a statement past statement_timeout,
 * PostgreSQL at its max_connections (53300: this and every other client of the server).
 */
function isBusy(err: unknown): boolean {
  return isContention(err) || ['55P03', '57014', '53300'].includes((err as { code?: string })?.code ?? '');
}

export { isBusy, isUnavailable };
