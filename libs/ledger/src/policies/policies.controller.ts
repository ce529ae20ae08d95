import { Body, Controller, Delete, Get, HttpCode, Param, Put, UseGuards } from '@nestjs/common';
import { idSchema, policySchema, type Policy } from '@tollgate/contracts';
import { CACHE_CHANNELS, notifySql, PrismaService } from '@tollgate/database';
import { AppError, AuthGuard, Caches, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { z } from 'zod';

type PolicyRow = Awaited<ReturnType<PrismaService['policy']['findFirst']>> & {};

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

/** A stored policy as the API shows it (limits in units, not micro-units). */
export const policyView = (p: PolicyRow) => ({
  name: p.name,
  scope: p.scope,
  window: p.window,
  maxCost: p.maxCostMicros === null ? undefined : Number(p.maxCostMicros) / 1e6,
  costUnit: p.costUnit ?? undefined,
  maxTotalTokens: p.maxTotalTokens === null ? undefined : Number(p.maxTotalTokens),
  maxInputTokens: p.maxInputTokens === null ? undefined : Number(p.maxInputTokens),
  maxOutputTokens: p.maxOutputTokens === null ? undefined : Number(p.maxOutputTokens),
  warnAtPercent: p.warnAtPercent ?? undefined,
  strategy: p.strategy,
  onExceed: p.onExceed ?? undefined,
  entityName: p.entityName ?? undefined,
  alerts: p.alerts.length ? p.alerts : undefined,
  alertHysteresis: p.alertHysteresis ?? undefined,
  updatedAt: p.updatedAt.toISOString(),
});

/** Stored budgets: applied to every guard check of the project; a request cannot switch them off. */
@Controller('v1/policies')
@UseGuards(AuthGuard)
export class PoliciesController {
  constructor(
    private readonly prisma: PrismaService,
    private readonly caches: Caches,
  ) {}

  /** Guard checks cache a project's policies: announce the change with it, and forget it here. */
  private announce(projectId: string) {
    return this.prisma.$executeRawUnsafe(notifySql(CACHE_CHANNELS.projects), projectId);
  }

  @Put(':name')
  @RequireScope('admin')
  @Documented({ summary: 'Create or replace a budget policy', tag: 'guard', auth: 'admin', body: policySchema, response: policyResponse })
  async put(@CurrentPrincipal() principal: Principal, @Param('name', new ZodPipe(idSchema, 'name')) name: string, @Body(new ZodPipe(policySchema)) body: Policy) {
    const data = {
      scope: body.scope,
      window: body.window,
      maxCostMicros: body.maxCost === undefined ? null : BigInt(Math.round(body.maxCost * 1e6)),
      costUnit: body.costUnit ?? null,
      maxTotalTokens: body.maxTotalTokens === undefined ? null : BigInt(body.maxTotalTokens),
      maxInputTokens: body.maxInputTokens === undefined ? null : BigInt(body.maxInputTokens),
      maxOutputTokens: body.maxOutputTokens === undefined ? null : BigInt(body.maxOutputTokens),
      warnAtPercent: body.warnAtPercent ?? null,
      strategy: body.strategy,
      onExceed: body.onExceed ?? null,
      entityName: body.entityName ?? null,
      alerts: [...(body.alerts ?? [])].sort((a, b) => a - b),
      alertHysteresis: body.alertHysteresis ?? null,
      updatedAt: new Date(),
    };
    const [row] = await this.prisma.$transaction([
      this.prisma.policy.upsert({
        where: { projectId_name: { projectId: principal.projectId, name } },
        create: { projectId: principal.projectId, name, ...data },
        update: data,
      }),
      this.announce(principal.projectId),
    ]);
    this.caches.projects.evict(principal.projectId);
    return policyView(row);
  }

  @Get()
  @RequireScope('read')
  @Documented({ summary: "List the project's budget policies", tag: 'guard', auth: 'read', response: z.object({ policies: z.array(policyResponse) }) })
  async list(@CurrentPrincipal() principal: Principal) {
    const rows = await this.prisma.policy.findMany({ where: { projectId: principal.projectId }, orderBy: { name: 'asc' } });
    return { policies: rows.map(policyView) };
  }

  @Delete(':name')
  @HttpCode(204)
  @RequireScope('admin')
  @Documented({ summary: 'Delete a budget policy', tag: 'guard', auth: 'admin' })
  async remove(@CurrentPrincipal() principal: Principal, @Param('name', new ZodPipe(idSchema, 'name')) name: string) {
    const [{ count }] = await this.prisma.$transaction([this.prisma.policy.deleteMany({ where: { projectId: principal.projectId, name } }), this.announce(principal.projectId)]);
    this.caches.projects.evict(principal.projectId);
    if (!count) throw new AppError('not_found', `No policy ${name} in this project`, 'name');
  }
}
