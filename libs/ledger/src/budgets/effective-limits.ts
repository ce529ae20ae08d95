import {
  SCOPE_TABLE,
  SCOPES,
  scopeIdIn,
  type GuardCheckRequest,
  type GuardContext,
  type Scope,
  type Window,
} from '@tollgate/contracts';
import type { EffectiveLimit } from './guard-decision';
import type { StoredPolicy } from './stored-policy';

/**
 * The floor of a step the caller can run shorter, or undefined when it cannot: a request says it
 * can by asking to shrink or by giving the floor itself. Without that, no limit shrinks a step
 * (a client that ignores `adjust` would run it at its full size against a smaller reservation).
 */
export function shrinkOf(request: GuardCheckRequest): { minOutputTokens: number } | undefined {
  if (request.onExceed !== 'shrink' && request.minOutputTokens === undefined) return undefined;
  return { minOutputTokens: request.minOutputTokens ?? 1 };
}

/** The id of each scope in a step's context; the run is the trace (runId stands in when no traceId is given). */
export function scopeIdOf(context: GuardContext, scope: Scope): string | undefined {
  return scopeIdIn(context, scope);
}

/** Every scope key a step touches: a reservation holds budget in all of them. */
export function scopeKeysOf(context: GuardContext): string[] {
  const keys = SCOPES.map((s) => (scopeIdOf(context, s) ? `${s}:${scopeIdOf(context, s)}` : null)).filter(
    (k): k is string => k !== null,
  );
  // A step's events count under both its trace and its run id; so must its reservation.
  if (context.traceId && context.runId && context.runId !== context.traceId) keys.push(`run:${context.runId}`);
  return keys.sort();
}

const micros = (usd: number | undefined) => (usd === undefined ? undefined : Math.round(usd * 1_000_000));
const num = (v: number | string | null) => (v === null ? undefined : Number(v));

export interface LimitsResult {
  limits: EffectiveLimit[];
  skipped: { scope: Scope; reason: string }[];
}

/**
 * The request's limits and the project's policies, resolved against the step's context. A policy
 * always applies (a request cannot switch it off); one with an entityName only to that entity's steps.
 */
export function effectiveLimits(
  request: GuardCheckRequest,
  policies: readonly StoredPolicy[],
  projectCostUnit: string,
): LimitsResult {
  const limits: EffectiveLimit[] = [];
  const skipped: LimitsResult['skipped'] = [];
  const resolve = (scope: Scope, window: Window, rest: Omit<EffectiveLimit, 'scope' | 'scopeKey' | 'window'>) => {
    const id = scopeIdOf(request.context, scope);
    if (!id) {
      if (!skipped.some((s) => s.scope === scope))
        skipped.push({
          scope,
          reason: `no ${scope === 'run' ? 'traceId or runId' : SCOPE_TABLE[scope].field} in context`,
        });
      return;
    }
    limits.push({ scope, scopeKey: `${scope}:${id}`, window: scope === 'run' ? null : window, ...rest });
  };
  for (const l of request.limits ?? []) {
    resolve(l.scope, l.window, {
      maxCostMicros: micros(l.maxCost),
      costUnit: l.costUnit ?? projectCostUnit,
      maxTotalTokens: l.maxTotalTokens,
      maxInputTokens: l.maxInputTokens,
      maxOutputTokens: l.maxOutputTokens,
      warnAtPercent: l.warnAtPercent,
      strategy: 'block',
      onExceed: request.onExceed ?? 'block',
      source: 'request',
    });
  }
  for (const p of policies) {
    if (p.entity_name !== null && p.entity_name !== request.context.entityName) continue;
    resolve(p.scope as Scope, p.window as Window, {
      maxCostMicros: num(p.max_cost_micros),
      costUnit: p.cost_unit ?? projectCostUnit,
      maxTotalTokens: num(p.max_total_tokens),
      maxInputTokens: num(p.max_input_tokens),
      maxOutputTokens: num(p.max_output_tokens),
      warnAtPercent: p.warn_at_percent ?? undefined,
      strategy: p.strategy,
      onExceed: p.on_exceed ?? request.onExceed ?? 'block',
      source: `policy:${p.name}`,
    });
  }
  return { limits, skipped };
}
