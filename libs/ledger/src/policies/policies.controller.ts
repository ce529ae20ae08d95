import { Body, Controller, Delete, Get, HttpCode, Param, Put, UseGuards } from '@nestjs/common';
import { idSchema, policySchema, type Policy } from '@tollgate/contracts';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { z } from 'zod';
import { PoliciesService } from './policies.service';

/** What policyView answers (the OpenAPI document's response schema). */
export const policyResponse = z.object({
  name: z.string().describe('The policy name (the last part of its URL)'),
  scope: z.string().describe('run, thread, resource, user, organization or session'),
  window: z.string().describe('The rolling window (1h … 365d); a run budget has none: it counts the whole run'),
  maxCost: z.number().optional().describe('In costUnit (the project unit when unset)'),
  costUnit: z.string().optional().describe('Three-letter currency code'),
  maxTotalTokens: z.number().optional(),
  maxInputTokens: z.number().optional(),
  maxOutputTokens: z.number().optional(),
  warnAtPercent: z.number().optional().describe('Answer a warning past this share of a limit'),
  strategy: z.enum(['block', 'warn']).describe('block: deny past a limit; warn: allow with a warning'),
  onExceed: z.enum(['block', 'shrink']).optional(),
  entityName: z.string().optional().describe('Applies only to steps of this agent'),
  alerts: z.array(z.number()).optional().describe('Percent thresholds that raise budget alerts'),
  alertHysteresis: z.number().optional(),
  updatedAt: z.string().describe('ISO 8601'),
});

/** Stored budgets: applied to every guard check of the project; a request cannot switch them off. */
@Controller('v1/policies')
@UseGuards(AuthGuard)
export class PoliciesController {
  constructor(private readonly policies: PoliciesService) {}

  @Put(':name')
  @RequireScope('admin')
  @Documented({
    summary: 'Create or replace a budget policy',
    tag: 'guard',
    auth: 'admin',
    body: policySchema,
    response: policyResponse,
  })
  put(
    @CurrentPrincipal() principal: Principal,
    @Param('name', new ZodPipe(idSchema, 'name')) name: string,
    @Body(new ZodPipe(policySchema)) body: Policy,
  ) {
    return this.policies.put(principal.projectId, name, body);
  }

  @Get()
  @RequireScope('read')
  @Documented({
    summary: "List the project's budget policies",
    tag: 'guard',
    auth: 'read',
    response: z.object({ policies: z.array(policyResponse) }),
  })
  async list(@CurrentPrincipal() principal: Principal) {
    return { policies: await this.policies.list(principal.projectId) };
  }

  @Delete(':name')
  @HttpCode(204)
  @RequireScope('admin')
  @Documented({ summary: 'Delete a budget policy', tag: 'guard', auth: 'admin', errors: ['not_found'] })
  remove(@CurrentPrincipal() principal: Principal, @Param('name', new ZodPipe(idSchema, 'name')) name: string) {
    return this.policies.remove(principal.projectId, name);
  }
}
