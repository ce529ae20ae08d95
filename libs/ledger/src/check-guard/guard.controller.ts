import { Body, Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { guardCheckRequestSchema, idSchema, type GuardCheckRequest } from '@tollgate/contracts';
import { EVENT_SELECT, PrismaService } from '@tollgate/database';
import { AppError, AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { z } from 'zod';
import { ReservationsService } from '../reservations/reservations.service';
import { CheckGuard } from './check-guard.command';

const decisionsQuery = z.strictObject({
  scopeKey: z.string().regex(/^(run|thread|resource|user|organization|session):.+$/, 'must look like resource:<id>').optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});

const SCOPE_COLUMNS: Record<string, string> = { run: 'trace_id', thread: 'thread_id', resource: 'resource_id', user: 'user_id', organization: 'organization_id', session: 'session_id' };

@Controller('v1/guard')
@UseGuards(AuthGuard)
export class GuardController {
  constructor(
    private readonly commands: CommandBus,
    private readonly reservations: ReservationsService,
    private readonly prisma: PrismaService,
  ) {}

  @Post('check')
  @HttpCode(200)
  @RequireScope('guard')
  @Documented({ summary: 'May this step run within the budgets of its scopes? Optionally reserve its estimate.', tag: 'guard', auth: 'guard', body: guardCheckRequestSchema })
  check(@CurrentPrincipal() principal: Principal, @Body(new ZodPipe(guardCheckRequestSchema)) body: GuardCheckRequest) {
    return this.commands.execute(new CheckGuard(principal.projectId, body));
  }

  @Post('reservations/:id/release')
  @HttpCode(200)
  @RequireScope('guard')
  @Documented({ summary: 'Release a reservation (idempotent); its budget is free at once', tag: 'guard', auth: 'guard' })
  release(@CurrentPrincipal() principal: Principal, @Param('id', new ZodPipe(idSchema, 'id')) id: string, @Body() body: unknown) {
    // The route takes no body; anything but none or {} is a client mistake, not something to ignore.
    const isObject = typeof body === 'object' && body !== null && !Array.isArray(body);
    if (body !== undefined && !(isObject && Object.keys(body).length === 0)) {
      const field = isObject ? Object.keys(body)[0] : '(body)';
      throw new AppError('validation_failed', `${field} is not a known field (this route takes no body)`, field);
    }
    return this.reservations.release(principal.projectId, id);
  }

  @Get('decisions')
  @RequireScope('read')
  @Documented({ summary: 'Recent denials and warnings (the GuardDecided audit), newest first', tag: 'guard', auth: 'read', query: decisionsQuery })
  async decisions(@CurrentPrincipal() principal: Principal, @Query(new ZodPipe(decisionsQuery)) q: z.infer<typeof decisionsQuery>) {
    const params: unknown[] = [principal.projectId, q.limit];
    let filter = '';
    if (q.scopeKey) {
      const [scope, ...rest] = q.scopeKey.split(':');
      params.push(rest.join(':'));
      filter = `AND ${SCOPE_COLUMNS[scope]} = $3`;
    }
    const rows = await this.prisma.$queryRawUnsafe<any[]>(
      `SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1 AND type = 'GuardDecided' ${filter} ORDER BY occurred_at DESC, position DESC LIMIT $2`,
      ...params,
    );
    return {
      decisions: rows.map((r) => ({
        eventId: r.event_id,
        occurredAt: r.occurred_at.toISOString(),
        decision: r.data.decision,
        violations: r.data.violations,
        warnings: r.data.warnings,
        context: Object.fromEntries(
          Object.entries({ traceId: r.trace_id, threadId: r.thread_id, resourceId: r.resource_id, userId: r.user_id, organizationId: r.organization_id, sessionId: r.session_id, entityName: r.entity_name }).filter(([, v]) => v !== null),
        ),
      })),
    };
  }
}
