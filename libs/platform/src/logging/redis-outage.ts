import { Logger } from '@nestjs/common';

/** Errors that mean "Redis cannot be reached", as ioredis and BullMQ report them. */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  if (!e) return false;
  if (
    e.code &&
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'EPIPE',
      'ENOTFOUND',
      'EAI_AGAIN',
      'EHOSTUNREACH',
      'ENETUNREACH',
    ].includes(e.code)
  )
    return true;
  return /ECONNREFUSED|ECONNRESET|ETIMEDOUT|Connection is closed|connect ETIMEDOUT|Stream isn't writeable|enableOfflineQueue|getaddrinfo/i.test(
    String(e.message ?? ''),
  );
}

/**
 * One process, one Redis: every client of it (ours, each queue's, each worker's) fails at once
 * when it goes. This says so once — a warning when it goes, a line when it is back — instead of
 * one error per client per reconnection attempt.
 */
export class RedisOutage {
  private downSince: number | null = null;
  private readonly logger = new Logger('redis');
  private target = '';

  /** The Redis being watched, without its password (named in the lines). */
  watch(redisUrl: string): void {
    this.target = redactUrl(redisUrl);
  }

  get down(): boolean {
    return this.downSince !== null;
  }

  /** A client's error: true when it was a connection error (now logged, or already known). */
  failed(err: unknown, source?: string): boolean {
    if (!isConnectionError(err)) return false;
    if (this.downSince === null) {
      this.downSince = Date.now();
      this.logger.warn({
        msg: 'redis unreachable: queues and rate limits wait for it, usage is still recorded in PostgreSQL',
        redis: this.target,
        error: (err as Error).message,
        ...(source ? { source } : {}),
      });
    }
    return true;
  }

  /** A client is connected again. */
  ready(): void {
    if (this.downSince === null) return;
    this.logger.log({ msg: 'redis is back', redis: this.target, downMs: Date.now() - this.downSince });
    this.downSince = null;
  }
}

/** The process's one watcher (every Redis client reports to it). */
export const redisOutage = new RedisOutage();

/** A connection URL without its password (`postgresql://postgres:***@host/db`). */
export function redactUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}
