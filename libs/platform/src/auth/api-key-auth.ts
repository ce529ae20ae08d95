import { Injectable } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import type { FastifyRequest } from 'fastify';
import { Caches, type KeyRow } from '../caches';
import { AppError } from '../errors/app-error';
import { parseKey, secretMatches, type KeyScope } from './api-key';
import { AuthFailureThrottle } from './auth-failure-throttle';

export interface Principal {
  projectId: string;
  keyId: string;
  scopes: KeyScope[];
}

export type AuthedRequest = FastifyRequest & { principal?: Principal };

/** The token of `Authorization: Bearer <token>`, or null. */
export function bearer(req: FastifyRequest): string | null {
  const header = req.headers.authorization;
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : null;
}

/** 429 for a client past its allowance of failed authentications. */
export function tooManyFailures(waitMs: number): AppError {
  return new AppError(
    'rate_limited',
    'Too many failed authentication attempts; retry after the Retry-After header',
    'authorization',
    Math.max(1, Math.ceil(waitMs / 1000)),
  );
}

/**
 * Who a request's project key is. The key row is read through the key cache (invalidated on every
 * replica when a key changes), so a revoked key stops working at once. The key is checked before
 * the failure throttle is asked anything: a valid key never waits on it; a failure is counted per
 * client address and, for a key that exists, per key id (401, or 429 past the allowance).
 */
@Injectable()
export class ApiKeyAuth {
  constructor(
    private readonly prisma: PrismaService,
    private readonly caches: Caches,
    private readonly failures: AuthFailureThrottle,
  ) {}

  /** The request's principal (also set on it), or throws the AppError to answer. */
  async authenticate(req: AuthedRequest): Promise<Principal> {
    if (req.principal) return req.principal;
    const token = bearer(req);
    if (!token) throw new AppError('unauthorized', 'Missing Authorization: Bearer <key> header', 'authorization');
    const parsed = parseKey(token);
    const row = parsed
      ? await this.caches.keys.get(parsed.id, async () => {
          const [found] = await this.prisma.sql.query<KeyRow>(
            'SELECT project_id, secret_hash, scopes, revoked_at FROM api_keys WHERE id = $1',
            parsed.id,
          );
          return found ?? null;
        })
      : null;
    if (!parsed || !row || row.revoked_at || !secretMatches(parsed.secret, row.secret_hash)) {
      // An unknown id is counted against the address only: there is no key of that id to protect.
      throw await this.refusal(req, 'Invalid or revoked API key', row ? parsed!.id : undefined);
    }
    req.principal = { projectId: row.project_id, keyId: parsed.id, scopes: row.scopes as KeyScope[] };
    return req.principal;
  }

  /** A failed authentication: 401, or 429 once the address or key id is past its allowance. */
  async refusal(req: FastifyRequest, message: string, keyId?: string): Promise<AppError> {
    const wait = await this.failures.failed(req.ip, keyId);
    return wait > 0 ? tooManyFailures(wait) : new AppError('unauthorized', message, 'authorization');
  }
}
