import { Body, Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import {
  guardCheckRequestSchema,
  guardCheckResponseSchema,
  guardFindingResponse,
  idSchema,
  scopeUsageResponse,
  scopeKeySchema,
  type GuardCheckRequest,
} from '@tollgate/contracts';
import {
  AppError,
  AuthGuard,
  CurrentPrincipal,
  Documented,
  RequireScope,
  ZodPipe,
  type Principal,
} from '@tollgate/platform';
import { z } from 'zod';
import { policyResponse } from '../../policies/policies.controller';
import { ReservationsService } from '../../reservations/reservations.service';
import { CheckGuard } from '../check-guard.command';
import { GuardReader } from '../guard-reader';
import { ScopeUsageReport } from '../scope-usage-report.query';

const decisionsQuery = z.strictObject({
  scopeKey: scopeKeySchema.optional(),
  limit: z.coerce
    .number({ error: 'must be a number' })
    .int('must be an integer')
    .min(1, 'must be at least 1')
    .max(500, 'must be at most 500')
    .default(50),
});

const usageQuery = z.strictObject({ scopeKey: scopeKeySchema });

/** What GET /v1/guard/usage answers (the OpenAPI document's response schema). */
export const usageResponse = z.strictObject({
  scopeKey: z.string().describe('The scope asked for'),
  policies: z.array(
    z.strictObject({
      ...policyResponse.shape,
      usageKey: z
        .string()
        .describe("The key of this policy's usage in `usage` (`<scopeKey>@<window>`, or the run key)"),
    }),
  ),
  usage: z.record(z.string(), scopeUsageResponse).describe('As a guard check answers it, keyed by usageKey'),
  violations: z.array(guardFindingResponse).describe('Limits the scope has already passed'),
  warnings: z.array(guardFindingResponse),
  asOf: z.string().describe('ISO 8601: the time the usage was read'),
});

/** What POST /v1/guard/reservations/:id/release answers: the reservation's state after it. */
export const releaseResponse = z.strictObject({
  id: z.string(),
  status: z
    .enum(['open', 'settled', 'released', 'lapsed'])
    .describe('released, or what the reservation already was: settled by its step event, or lapsed at expiry'),
  closedAt: z.string().nullable().describe('ISO 8601: when it was closed'),
});

const amounts = (cost: z.ZodType) =>
  z.strictObject({ cost, costUnit: z.string().nullable(), inputTokens: z.number(), outputTokens: z.number() });

/** What GET /v1/guard/exceeded answers. */
export const exceededResponse = z.strictObject({
  exceeded: z.array(
    z.strictObject({
      reservationId: z.string(),
      stepEventId: z.string().describe('The step event that settled the reservation'),
      occurredAt: z.string().describe('ISO 8601'),
      scopeKeys: z.array(z.string()).describe('The scopes the reservation held'),
      reserved: amounts(z.number()).describe('What the reservation held'),
      actual: amounts(z.number().nullable()).describe('What the step used; cost null when it was not priced'),
    }),
  ),
});

/** What GET /v1/guard/decisions answers. */
export const decisionsResponse = z.strictObject({
  decisions: z.array(
    z.strictObject({
      eventId: z.string().describe('The GuardDecided event'),
      occurredAt: z.string().describe('ISO 8601'),
      decision: z.enum(['allow', 'deny']).describe('allow: an allow with warnings'),
      violations: z.array(guardFindingResponse),
      warnings: z.array(guardFindingResponse),
      context: z.record(z.string(), z.string()).describe("The step's scope ids and entity name, those it had"),
    }),
  ),
});

@Controller('v1/guard')
@UseGuards(AuthGuard)
export class GuardController {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
    private readonly reservations: ReservationsService,
    private readonly reader: GuardReader,
  ) {}

  @Post('check')
  @HttpCode(200)
  @RequireScope('guard')
  @Documented({
    summary: 'May this step run within the budgets of its scopes? Optionally reserve its estimate.',
    tag: 'guard',
    auth: 'guard',
    errors: ['conflict'],
    body: guardCheckRequestSchema,
    response: guardCheckResponseSchema,
  })
  check(@CurrentPrincipal() principal: Principal, @Body(new ZodPipe(guardCheckRequestSchema)) body: GuardCheckRequest) {
    return this.commands.execute(new CheckGuard(principal.projectId, body));
  }

  @Post('reservations/:id/release')
  @HttpCode(200)
  @RequireScope('guard')
  @Documented({
    summary: 'Release a reservation (idempotent); its budget is free at once',
    tag: 'guard',
    auth: 'guard',
    errors: ['not_found'],
    response: releaseResponse,
  })
  release(
    @CurrentPrincipal() principal: Principal,
    @Param('id', new ZodPipe(idSchema, 'id')) id: string,
    @Body() body: unknown,
  ) {
    // The route takes no body; anything but none or {} is a client mistake, not something to ignore.
    const isObject = typeof body === 'object' && body !== null && !Array.isArray(body);
    if (body !== undefined && !(isObject && Object.keys(body).length === 0)) {
      const field = isObject ? Object.keys(body)[0] : '(body)';
      throw new AppError('validation_failed', `${field} is not a known field (this route takes no body)`, field);
    }
    return this.reservations.release(principal.projectId, id);
  }

  @Get('usage')
  @RequireScope('read')
  @Documented({
    summary: "A scope's usage against every stored policy on it (a dry-run check, read-only)",
    tag: 'guard',
    auth: 'read',
    query: usageQuery,
    response: usageResponse,
  })
  usage(@CurrentPrincipal() principal: Principal, @Query(new ZodPipe(usageQuery)) q: z.infer<typeof usageQuery>) {
    return this.queries.execute(new ScopeUsageReport(principal.projectId, q.scopeKey));
  }

  @Get('exceeded')
  @RequireScope('read')
  @Documented({
    summary: 'Settlements whose actual usage passed their reservation (ReservationExceeded), newest first',
    tag: 'guard',
    auth: 'read',
    query: decisionsQuery,
    response: exceededResponse,
  })
  async exceeded(
    @CurrentPrincipal() principal: Principal,
    @Query(new ZodPipe(decisionsQuery)) q: z.infer<typeof decisionsQuery>,
  ) {
    return { exceeded: await this.reader.exceeded(principal.projectId, q.scopeKey, q.limit) };
  }

  @Get('decisions')
  @RequireScope('read')
  @Documented({
    summary: 'Recent denials and warnings (the GuardDecided audit), newest first',
    tag: 'guard',
    auth: 'read',
    query: decisionsQuery,
    response: decisionsResponse,
  })
  async decisions(
    @CurrentPrincipal() principal: Principal,
    @Query(new ZodPipe(decisionsQuery)) q: z.infer<typeof decisionsQuery>,
  ) {
    return { decisions: await this.reader.decisions(principal.projectId, q.scopeKey, q.limit) };
  }
}
