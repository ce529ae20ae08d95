import { CanActivate, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { PrismaService } from '@tollgate/database';
import type { FastifyRequest } from 'fastify';
import { Caches } from '../caches';
import { Config } from '../config';
import { AppError } from '../errors/app-error';
import { RateLimiter } from '../rate-limit/rate-limiter';
import { parseKey, secretMatches, tokensMatch, type KeyScope } from './api-key';

export interface Principal {
  projectId: string;
  keyId: string;
  scopes: KeyScope[];
}

const SCOPE = 'tollgate:scope';
const ADMIN = 'tollgate:admin';

/** The route needs a project key with this scope. */
export const RequireScope = (scope: KeyScope) => SetMetadata(SCOPE, scope);
/** The route needs the operator's TOLLGATE_ADMIN_TOKEN. */
export const RequireAdminToken = () => SetMetadata(ADMIN, true);

export type AuthedRequest = FastifyRequest & { principal?: Principal };

function bearer(req: FastifyRequest): string | null {
  const header = req.headers.authorization;
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : null;
}

/**
 * Authenticates every route that declares a scope or the admin token, then applies the key's rate limit. The key row is read on
 * every request, so a revoked key stops working at once on every replica.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly prisma: PrismaService,
    private readonly config: Config,
    private readonly limiter: RateLimiter,
    private readonly caches: Caches,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    const scope = this.reflector.getAllAndOverride<KeyScope | undefined>(SCOPE, targets);
    const admin = this.reflector.getAllAndOverride<boolean | undefined>(ADMIN, targets);
    if (!scope && !admin) return true;
    const req = context.switchToHttp().getRequest<AuthedRequest>();
    const token = bearer(req);
    if (!token) throw new AppError('unauthorized', 'Missing Authorization: Bearer <key> header', 'authorization');

    if (admin) {
      const expected = this.config.values.TOLLGATE_ADMIN_TOKEN;
      if (!expected) throw new AppError('forbidden', 'Admin routes are disabled: set TOLLGATE_ADMIN_TOKEN to enable them');
      if (!tokensMatch(token, expected)) throw new AppError('unauthorized', 'Invalid admin token', 'authorization');
      return true;
    }

    const parsed = parseKey(token);
    type KeyRow = { project_id: string; secret_hash: string; scopes: string[]; revoked_at: Date | null };
    const row = parsed
      ? ((await this.caches.keys.get(parsed.id, async () => {
          const [found] = await this.prisma.sql.query<KeyRow>('SELECT project_id, secret_hash, scopes, revoked_at FROM api_keys WHERE id = $1', parsed.id);
          return found ?? null;
        })) as KeyRow | null)
      : null;
    if (!parsed || !row || row.revoked_at || !secretMatches(parsed.secret, row.secret_hash)) {
      throw new AppError('unauthorized', 'Invalid or revoked API key', 'authorization');
    }
    if (!row.scopes.includes(scope!)) {
      throw new AppError('forbidden', `This key lacks the '${scope}' scope (it has: ${row.scopes.join(', ') || 'none'})`);
    }
    const waitMs = await this.limiter.take(parsed.id);
    if (waitMs > 0) {
      throw new AppError('rate_limited', `This key made more than ${this.config.values.RATE_LIMIT_PER_KEY_PER_SECOND} requests per second; retry after the Retry-After header`, undefined, Math.ceil(waitMs / 1000));
    }
    req.principal = { projectId: row.project_id, keyId: parsed.id, scopes: row.scopes as KeyScope[] };
    return true;
  }
}
