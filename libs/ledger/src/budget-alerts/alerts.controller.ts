import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { scopeKeySchema } from '@tollgate/contracts';
import { PrismaService } from '@tollgate/database';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { z } from 'zod';
import { readAlerts } from './read-alerts.sql';

const alertsQuery = z.strictObject({
  scopeKey: scopeKeySchema.optional(),
  limit: z.coerce
    .number({ error: 'must be a number' })
    .int('must be an integer')
    .min(1, 'must be at least 1')
    .max(500, 'must be at most 500')
    .default(50),
});

/** Budget alerts (BudgetThresholdCrossed, BudgetExhausted) as the log holds them. */
@Controller('v1/alerts')
@UseGuards(AuthGuard)
export class AlertsController {
  constructor(private readonly prisma: PrismaService) {}

  @Get()
  @RequireScope('read')
  @Documented({
    summary: 'Budget alerts (thresholds crossed, budgets exhausted), newest first, optionally of one scope',
    tag: 'guard',
    auth: 'read',
    query: alertsQuery,
  })
  async list(
    @CurrentPrincipal() principal: Principal,
    @Query(new ZodPipe(alertsQuery)) q: z.infer<typeof alertsQuery>,
  ) {
    return { alerts: await readAlerts(this.prisma.sql, principal.projectId, q.scopeKey, q.limit) };
  }
}
