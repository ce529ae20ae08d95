import type { PrismaService } from '@tollgate/database';

export type PolicyRow = Awaited<ReturnType<PrismaService['policy']['findFirst']>> & {};

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

export type PolicyView = ReturnType<typeof policyView>;
