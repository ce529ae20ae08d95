import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { AuthedRequest, Principal } from './auth.guard';

/** The authenticated project key of the request (set by AuthGuard). */
export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => {
  const principal = ctx.switchToHttp().getRequest<AuthedRequest>().principal;
  if (!principal) throw new Error('CurrentPrincipal used on a route without RequireScope');
  return principal;
});
