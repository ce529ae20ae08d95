import type { GuardFinding, LimitType, Scope, Window } from '@tollgate/contracts';

/** A limit to enforce, from the request or from a stored policy (all amounts in micro-units / tokens). */
export interface EffectiveLimit {
  scope: Scope;
  scopeKey: string;
  /** null for the run scope, which is bounded by the run itself. */
  window: Window | null;
  maxCostMicros?: number;
  maxTotalTokens?: number;
  maxInputTokens?: number;
  maxOutputTokens?: number;
  warnAtPercent?: number;
  strategy: 'block' | 'warn';
  source: string;
}

/** Usage of one scope in one window: committed events plus open reservations. */
export interface UsageTotals {
  inputTokens: number;
  outputTokens: number;
  costMicros: number;
  /** The one cost unit of the usage, or null when there is none yet or several. */
  costUnit: string | null;
  unpricedEvents: number;
  reservedCostMicros: number;
  reservedInputTokens: number;
  reservedOutputTokens: number;
}

export interface StepEstimate {
  inputTokens: number;
  outputTokens: number;
  /** null when the model has no price. */
  costMicros: number | null;
  costUnit: string;
}

export interface Decision {
  decision: 'allow' | 'deny';
  violations: GuardFinding[];
  warnings: GuardFinding[];
}

export const EMPTY_USAGE: UsageTotals = { inputTokens: 0, outputTokens: 0, costMicros: 0, costUnit: null, unpricedEvents: 0, reservedCostMicros: 0, reservedInputTokens: 0, reservedOutputTokens: 0 };

export const usageKey = (scopeKey: string, window: Window | null) => (window ? `${scopeKey}@${window}` : scopeKey);

const MICRO = 1_000_000;

/**
 * Decides whether a step fits every limit. A limit is reached when usage (committed + reserved,
 * plus the step's estimate when given) is greater than or equal to it, as in Mastra. A `warn`
 * policy reports its limit without blocking. Unpriced usage counts as tokens only, unless the
 * project denies cost-limited steps that involve it.
 */
export function decide(
  limits: readonly EffectiveLimit[],
  usage: ReadonlyMap<string, UsageTotals>,
  estimate: StepEstimate | undefined,
  unpricedPolicy: 'count_tokens' | 'deny',
): Decision {
  const violations: GuardFinding[] = [];
  const warnings: GuardFinding[] = [];
  for (const limit of limits) {
    const u = usage.get(usageKey(limit.scopeKey, limit.window)) ?? EMPTY_USAGE;
    const estIn = estimate?.inputTokens ?? 0;
    const estOut = estimate?.outputTokens ?? 0;
    const checks: [LimitType, number | undefined, number, string, number][] = [
      ['cost', limit.maxCostMicros, u.costMicros + u.reservedCostMicros + (estimate?.costMicros ?? 0), u.costUnit ?? estimate?.costUnit ?? 'USD', MICRO],
      ['totalTokens', limit.maxTotalTokens, u.inputTokens + u.outputTokens + u.reservedInputTokens + u.reservedOutputTokens + estIn + estOut, 'tokens', 1],
      ['inputTokens', limit.maxInputTokens, u.inputTokens + u.reservedInputTokens + estIn, 'tokens', 1],
      ['outputTokens', limit.maxOutputTokens, u.outputTokens + u.reservedOutputTokens + estOut, 'tokens', 1],
    ];
    for (const [limitType, max, value, unit, scale] of checks) {
      if (max === undefined) continue;
      const finding = (threshold: 'soft' | 'hard'): GuardFinding => ({
        scope: limit.scope,
        scopeKey: limit.scopeKey,
        window: limit.window,
        limitType,
        usage: value / scale,
        limit: max / scale,
        unit,
        threshold,
        source: limit.source,
      });
      const unpricedDenied = limitType === 'cost' && unpricedPolicy === 'deny' && (u.unpricedEvents > 0 || (estimate !== undefined && estimate.costMicros === null));
      if (value >= max || unpricedDenied) {
        (limit.strategy === 'block' ? violations : warnings).push(finding('hard'));
      } else if (limit.warnAtPercent !== undefined && value >= (max * limit.warnAtPercent) / 100) {
        warnings.push(finding('soft'));
      }
    }
  }
  return { decision: violations.length ? 'deny' : 'allow', violations, warnings };
}
