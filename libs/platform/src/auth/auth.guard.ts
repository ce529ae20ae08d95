import { CanActivate, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Config } from '../config';
import { AppError } from '../errors/app-error';
import { RateLimiter } from '../rate-limit/rate-limiter';
import { tokensMatch, type KeyScope } from './api-key';
import { ApiKeyAuth, bearer, tooManyFailures, type AuthedRequest } from './api-key-auth';
import { AuthFailureThrottle } from './auth-failure-throttle';

export type { AuthedRequest, Principal } from './api-key-auth';

const SCOPE = 'tollgate:scope';
const ADMIN = 'tollgate:admin';

/** The route needs a project key with this scope (or, given several, any one of them). */
export const RequireScope = (...scopes: [KeyScope, ...KeyScope[]]) => SetMetadata(SCOPE, scopes);
/** The route needs the operator's TOLLGATE_ADMIN_TOKEN. */
export const RequireAdminToken = () => SetMetadata(ADMIN, true);

/**
 * Authenticates every route that declares a scope (ApiKeyAuth; ingest is authenticated earlier, as
 * it arrives, and reuses that) or the admin token, then applies the key's rate limit.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly config: Config,
    private readonly limiter: RateLimiter,
    private readonly keys: ApiKeyAuth,
    private readonly failures: AuthFailureThrottle,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    const scopes = this.reflector.getAllAndOverride<KeyScope[] | undefined>(SCOPE, targets);
    const admin = this.reflector.getAllAndOverride<boolean | undefined>(ADMIN, targets);
    if (!scopes && !admin) return true;
    const req = context.switchToHttp().getRequest<AuthedRequest>();

    if (admin) {
      const token = bearer(req);
      if (!token) throw new AppError('unauthorized', 'Missing Authorization: Bearer <key> header', 'authorization');
      const expected = this.config.values.TOLLGATE_ADMIN_TOKEN;
      if (!expected)
        throw new AppError('forbidden', 'Admin routes are disabled: set TOLLGATE_ADMIN_TOKEN to enable them');
      // The operator chose this token, so it may be guessable: a throttled address's guesses are not even compared.
      const wait = await this.failures.throttled(req.ip);
      if (wait > 0) throw tooManyFailures(wait);
      if (!tokensMatch(token, expected)) throw await this.keys.refusal(req, 'Invalid admin token');
      return true;
    }

    const principal = await this.keys.authenticate(req);
    if (!scopes!.some((s) => principal.scopes.includes(s))) {
      throw new AppError(
        'forbidden',
        `This key lacks the ${scopes!.map((s) => `'${s}'`).join(' or ')} scope (it has: ${principal.scopes.join(', ') || 'none'})`,
      );
    }
    const waitMs = await this.limiter.take(principal.keyId);
    if (waitMs > 0) {
      throw new AppError(
        'rate_limited',
        `This key made more than ${this.config.values.RATE_LIMIT_PER_KEY_PER_SECOND} requests per second; retry after the Retry-After header`,
        undefined,
        Math.ceil(waitMs / 1000),
      );
    }
    return true;
  }
}
