import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { scopeKeySchema } from '@tollgate/contracts';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { z } from 'zod';
import { AlertsReader } from './alerts-reader';

const alertsQuery = z.strictObject({
  scopeKey: scopeKeySchema.optional(),
  limit: z.coerce
    .number({ error: 'must be a number' })
    .int('must be an integer')
    .min(1, 'must be at least 1')
    .max(500, 'must be at most 500')
    .default(50),
});

/** What GET /v1/alerts answers (the OpenAPI document's response schema). */
export const alertsResponse = z.strictObject({
  alerts: z.array(
    z.strictObject({
      eventId: z.string(),
      kind: z
        .enum(['BudgetThresholdCrossed', 'BudgetExhausted'])
        .describe('A threshold crossed by committed usage, or a step denied for a spent budget'),
      occurredAt: z.string().describe('ISO 8601'),
      scope: z.string(),
      scopeKey: z.string().describe('`<scope>:<id>`'),
      window: z.string().nullable().describe('null for a run'),
      source: z.string().describe("The policy ('policy:<name>')"),
      limitType: z.string().describe('cost, totalTokens, inputTokens or outputTokens'),
      threshold: z.number().describe('Percent of the limit; 100 for BudgetExhausted'),
      usage: z.number(),
      limit: z.number(),
      unit: z.string(),
      stepEventId: z
        .string()
        .nullable()
        .optional()
        .describe('BudgetThresholdCrossed: the step whose commit crossed it'),
      stepId: z.string().nullable().optional().describe("BudgetExhausted: the denied check's stepId"),
    }),
  ),
});

/** Budget alerts (BudgetThresholdCrossed, BudgetExhausted) as the log holds them. */
@Controller('v1/alerts')
@UseGuards(AuthGuard)
export class AlertsController {
  constructor(private readonly alerts: AlertsReader) {}

  @Get()
  @RequireScope('read')
  @Documented({
    summary: 'Budget alerts (thresholds crossed, budgets exhausted), newest first, optionally of one scope',
    tag: 'guard',
    auth: 'read',
    query: alertsQuery,
    response: alertsResponse,
  })
  async list(
    @CurrentPrincipal() principal: Principal,
    @Query(new ZodPipe(alertsQuery)) q: z.infer<typeof alertsQuery>,
  ) {
    return { alerts: await this.alerts.list(principal.projectId, q.scopeKey, q.limit) };
  }
}
