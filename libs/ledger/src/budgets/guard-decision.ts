import {
  memoized,
  WINDOWS,
  type GuardAdjust,
  type GuardContext,
  type GuardEstimateView,
  type GuardFinding,
  type LimitType,
  type OnExceed,
  type Scope,
  type ScopeUsage,
  type Window,
} from '@tollgate/contracts';
import { systemEventId, type SystemEvent } from '../events';
import { convertMicros, type UnitRates } from './money';

/** A limit to enforce, from the request or from a stored policy (all amounts in micro-units / tokens). */
export interface EffectiveLimit {
  scope: Scope;
  scopeKey: string;
  /** null for the run scope, which is bounded by the run itself. */
  window: Window | null;
  maxCostMicros?: number;
  /** The unit of maxCostMicros. */
  costUnit: string;
  maxTotalTokens?: number;
  maxInputTokens?: number;
  maxOutputTokens?: number;
  warnAtPercent?: number;
  strategy: 'block' | 'warn';
  /** A step this limit blocks may instead run with fewer output tokens, when the caller can (`shrink`). Default `block`. */
  onExceed?: OnExceed;
  source: string;
}

/** Usage of one scope in one window: committed events plus open reservations, money kept per unit. */
export interface UsageTotals {
  inputTokens: number;
  outputTokens: number;
  /** Priced recorded cost, micro-units per unit. */
  costByUnit: Record<string, number>;
  unpricedEvents: number;
  unpricedInputTokens: number;
  unpricedOutputTokens: number;
  reservedInputTokens: number;
  reservedOutputTokens: number;
  reservedCostByUnit: Record<string, number>;
}

export const emptyUsage = (): UsageTotals => ({
  inputTokens: 0,
  outputTokens: 0,
  costByUnit: {},
  unpricedEvents: 0,
  unpricedInputTokens: 0,
  unpricedOutputTokens: 0,
  reservedInputTokens: 0,
  reservedOutputTokens: 0,
  reservedCostByUnit: {},
});

export const cloneUsage = (u: UsageTotals): UsageTotals => ({
  ...u,
  costByUnit: { ...u.costByUnit },
  reservedCostByUnit: { ...u.reservedCostByUnit },
});

/** A project's rate for usage of models it has no price for. */
export interface FallbackRate {
  inputPerMillion: number;
  outputPerMillion: number;
  currency: string;
}

/** What a project decides about money. */
export interface GuardSettings {
  /**
   * Unpriced usage in a cost budget: `deny` the step, price it at the project's `fallback` rate,
   * or `count_tokens` (its cost is not counted: such a budget does not bind unpriced steps).
   */
  unpricedPolicy: 'count_tokens' | 'deny' | 'fallback';
  fallback: FallbackRate | null;
  money: UnitRates;
}

/** The step about to run, priced, with the margin its provider's tokenizer needs. */
export interface StepEstimate {
  provider: string;
  model: string;
  /** As the caller estimated. */
  rawInputTokens: number;
  /** What is held: rawInputTokens × margin, rounded up. */
  inputTokens: number;
  outputTokens: number;
  margin: number;
  /** null when neither a price nor a fallback rate applies. */
  costMicros: number | null;
  costUnit: string | null;
  priced: boolean;
  priceId?: string;
  fallback?: 'project';
  /**
   * The same step's cost with `outputTokens` output tokens instead (same input, same price):
   * what lets the guard shrink a step. Never above `costMicros` for fewer tokens.
   */
  costAt?: (outputTokens: number) => number | null;
}

export interface Decision {
  decision: 'allow' | 'deny';
  violations: GuardFinding[];
  warnings: GuardFinding[];
}

/** A step shrunk to fit: its decision, the estimate held, and the adjustment the caller applies. */
export interface StepDecision {
  decision: Decision;
  /** The estimate decided on and held: the request's, or the shrunk one. */
  estimate?: StepEstimate;
  adjust?: GuardAdjust;
}

export const usageKey = (scopeKey: string, window: Window | null) => (window ? `${scopeKey}@${window}` : scopeKey);

const MICRO = 1_000_000;

/** Micro-units of the fallback rate's currency for unpriced tokens (rates per million tokens = micro-units per token). */
const fallbackMicros = (rate: FallbackRate, inputTokens: number, outputTokens: number) =>
  Math.ceil(inputTokens * rate.inputPerMillion + outputTokens * rate.outputPerMillion);

/**
 * Decides whether a step fits every limit. A limit is reached when usage (committed + reserved,
 * plus the step's estimate when given) is greater than or equal to it, as in Mastra. A `warn`
 * policy reports its limit without blocking. Money in a unit the project has no rate for is never
 * added to a limit in another unit: it is reported apart, as a warning naming the unit.
 */
export function decide(
  limits: readonly EffectiveLimit[],
  usage: ReadonlyMap<string, UsageTotals>,
  estimate: StepEstimate | undefined,
  settings: GuardSettings,
): Decision {
  const violations: GuardFinding[] = [];
  const warnings: GuardFinding[] = [];
  const estIn = estimate?.inputTokens ?? 0;
  const estOut = estimate?.outputTokens ?? 0;
  for (const limit of limits) {
    const u = usage.get(usageKey(limit.scopeKey, limit.window)) ?? emptyUsage();
    const finding = (
      limitType: LimitType,
      value: number,
      max: number,
      unit: string,
      threshold: 'soft' | 'hard',
      scale: number,
      reason?: string,
    ): GuardFinding => ({
      scope: limit.scope,
      scopeKey: limit.scopeKey,
      window: limit.window,
      limitType,
      usage: value / scale,
      limit: max / scale,
      unit,
      threshold,
      source: limit.source,
      ...(reason ? { reason } : {}),
    });
    const compare = (
      limitType: LimitType,
      max: number | undefined,
      value: number,
      unit: string,
      scale: number,
      forced?: string,
    ) => {
      if (max === undefined) return;
      if (value >= max || forced) {
        (limit.strategy === 'block' ? violations : warnings).push(
          finding(limitType, value, max, unit, 'hard', scale, forced),
        );
      } else if (limit.warnAtPercent !== undefined && value >= (max * limit.warnAtPercent) / 100) {
        warnings.push(finding(limitType, value, max, unit, 'soft', scale));
      }
    };

    if (limit.maxCostMicros !== undefined) {
      const cost = costInUnit(limit.costUnit, u, estimate, settings);
      for (const [unit, micros] of Object.entries(cost.apart)) {
        warnings.push(
          finding(
            'cost',
            micros,
            limit.maxCostMicros,
            unit,
            'soft',
            MICRO,
            `usage in ${unit} has no rate to ${limit.costUnit}: counted apart, not in this limit`,
          ),
        );
      }
      compare('cost', limit.maxCostMicros, cost.micros, limit.costUnit, MICRO, cost.blocking);
    }
    compare(
      'totalTokens',
      limit.maxTotalTokens,
      u.inputTokens + u.outputTokens + u.reservedInputTokens + u.reservedOutputTokens + estIn + estOut,
      'tokens',
      1,
    );
    compare('inputTokens', limit.maxInputTokens, u.inputTokens + u.reservedInputTokens + estIn, 'tokens', 1);
    compare('outputTokens', limit.maxOutputTokens, u.outputTokens + u.reservedOutputTokens + estOut, 'tokens', 1);
  }
  return { decision: violations.length ? 'deny' : 'allow', violations, warnings };
}

/**
 * `decide`, and when the step does not fit but its caller can run it shorter (`shrink`, with a
 * floor of `minOutputTokens`), the most output tokens that fit every limit: an `allow` whose
 * estimate (the one to reserve) has that many output tokens. A step is never shrunk past a limit
 * that must block (`onExceed: 'block'`, the default), nor when a shorter answer fits no better
 * (an input-token limit, an unpriced model): those answers stay the full step's deny.
 */
export function decideStep(
  limits: readonly EffectiveLimit[],
  usage: ReadonlyMap<string, UsageTotals>,
  estimate: StepEstimate | undefined,
  settings: GuardSettings,
  shrink?: { minOutputTokens: number },
): StepDecision {
  const full = decide(limits, usage, estimate, settings);
  if (full.decision === 'allow' || !shrink || !estimate?.costAt || estimate.outputTokens <= shrink.minOutputTokens)
    return { decision: full, estimate };
  const hardStops = limits.filter((l) => l.strategy === 'block' && l.onExceed !== 'shrink');
  if (hardStops.length && decide(hardStops, usage, estimate, settings).decision === 'deny')
    return { decision: full, estimate };
  const costAt = estimate.costAt;
  const withOutput = (outputTokens: number): StepEstimate => ({
    ...estimate,
    outputTokens,
    costMicros: costAt(outputTokens),
  });
  const fits = (outputTokens: number) => decide(limits, usage, withOutput(outputTokens), settings).decision === 'allow';
  // Usage only grows with output tokens, so the ones that fit are a prefix: bisect for its end.
  let lo = shrink.minOutputTokens;
  if (!fits(lo)) return { decision: full, estimate };
  let hi = estimate.outputTokens - 1;
  while (lo < hi) {
    const mid = lo + Math.ceil((hi - lo) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  const shrunk = withOutput(lo);
  const decision = decide(limits, usage, shrunk, settings);
  // What the full step would have broken is reported (and audited) as warnings, as a warn policy's limit is.
  const reason = `the step was shrunk to ${lo} output tokens (of ${estimate.outputTokens}) to fit`;
  decision.warnings.push(...full.violations.map((v) => ({ ...v, reason })));
  return {
    decision,
    estimate: shrunk,
    adjust: { maxOutputTokens: lo, requestedMaxOutputTokens: estimate.outputTokens, limitedBy: full.violations },
  };
}

/**
 * A scope's cost in one unit: recorded and reserved money converted with the project's rates,
 * unpriced usage at the fallback rate, and the step's estimate. What cannot be converted is
 * returned apart; what cannot be priced at all blocks (unless the project counts tokens only).
 */
function costInUnit(
  unit: string,
  u: UsageTotals,
  estimate: StepEstimate | undefined,
  settings: GuardSettings,
): { micros: number; apart: Record<string, number>; blocking?: string } {
  let micros = 0;
  const apart: Record<string, number> = {};
  const add = (amount: number, from: string) => {
    const converted = convertMicros(amount, from, unit, settings.money);
    if (converted === null) apart[from] = (apart[from] ?? 0) + amount;
    else micros += converted;
  };
  for (const [from, amount] of Object.entries(u.costByUnit)) add(amount, from);
  for (const [from, amount] of Object.entries(u.reservedCostByUnit)) add(amount, from);
  let blocking: string | undefined;
  if (u.unpricedEvents > 0) {
    if (settings.unpricedPolicy === 'deny')
      blocking = `${u.unpricedEvents} recorded step(s) in this window have no price (unpricedPolicy deny)`;
    else if (settings.unpricedPolicy === 'fallback' && settings.fallback)
      add(fallbackMicros(settings.fallback, u.unpricedInputTokens, u.unpricedOutputTokens), settings.fallback.currency);
  }
  if (estimate) {
    if (estimate.costMicros === null || estimate.costUnit === null) {
      if (settings.unpricedPolicy !== 'count_tokens')
        blocking ??= `${estimate.provider}/${estimate.model} has no price (unpricedPolicy ${settings.unpricedPolicy})`;
    } else {
      const converted = convertMicros(estimate.costMicros, estimate.costUnit, unit, settings.money);
      if (converted === null) blocking ??= `the step is priced in ${estimate.costUnit}, which has no rate to ${unit}`;
      else micros += converted;
    }
  }
  return { micros, apart, blocking };
}

/** A reservation to insert: the step's estimate, held in every window of `scopeKeys`. */
export interface NewReservation {
  id: string;
  stepId: string;
  /** The scope keys a limit was checked on: only these are held. */
  scopeKeys: string[];
  /** Every scope id of the step's context: a settling step event must carry the same. */
  contextKeys: string[];
  costMicros: number;
  costUnit: string;
  inputTokens: number;
  outputTokens: number;
  rawInputTokens: number;
  provider: string;
  model: string;
  createdAt: Date;
  expiresAt: Date;
}

/** One check of a group commit, as loaded by the handler. */
export interface CheckCase {
  context: GuardContext;
  limits: readonly EffectiveLimit[];
  estimate?: StepEstimate;
  /** The caller can run the step with fewer output tokens, down to this floor, rather than be denied. */
  shrink?: { minOutputTokens: number };
  reserve: boolean;
  /** Reserve only when the step fits with nothing to report; otherwise append nothing (see `declined`). */
  tentative?: boolean;
  audit: boolean;
  stepId?: string;
  contextKeys: string[];
}

export interface CheckOutcome {
  decision: Decision;
  /** The usage this check was decided on (the reservations of those before it included). */
  usage: Map<string, UsageTotals>;
  reservation?: NewReservation;
  /** The estimate decided on (and reserved): the shrunk one when `adjust` is set. */
  estimate?: StepEstimate;
  adjust?: GuardAdjust;
  events: SystemEvent[];
  /** A tentative check that did not fit with nothing to report: nothing reserved, no events. */
  declined?: true;
}

export interface DecisionContext {
  at: Date;
  reservationTtlMs: number;
  newId: () => string;
}

/**
 * Decides checks in arrival order against one usage read: each sees the reservations of those
 * before it, exactly as if each had its own transaction one after the other. Returns, per check,
 * its answer and the events to append; `usage` is updated with every reservation made.
 */
export function decideInOrder(
  cases: readonly CheckCase[],
  usage: Map<string, UsageTotals>,
  settings: GuardSettings,
  ctx: DecisionContext,
): CheckOutcome[] {
  return cases.map((c) => {
    const { decision, estimate, adjust } = decideStep(c.limits, usage, c.estimate, settings, c.shrink);
    const seen = new Map<string, UsageTotals>();
    for (const l of c.limits) {
      const k = usageKey(l.scopeKey, l.window);
      seen.set(k, cloneUsage(usage.get(k) ?? emptyUsage()));
    }
    if (c.tentative && (decision.decision === 'deny' || decision.warnings.length || adjust))
      return { decision, usage: seen, estimate, ...(adjust ? { adjust } : {}), events: [], declined: true };
    const events: SystemEvent[] = [];
    let reservation: NewReservation | undefined;
    if (c.reserve && estimate && c.stepId && decision.decision === 'allow') {
      reservation = reservationOf(c, estimate, c.stepId, ctx);
      hold(usage, reservation);
      events.push({
        type: 'BudgetReserved',
        eventId: systemEventId('reservation', reservation.id, 'reserved'),
        occurredAt: ctx.at,
        scopes: c.context,
        reservationId: reservation.id,
        data: {
          stepId: c.stepId,
          scopeKeys: reservation.scopeKeys,
          estimatedCost: reservation.costMicros / MICRO,
          costUnit: reservation.costUnit || null,
          inputTokens: reservation.inputTokens,
          outputTokens: reservation.outputTokens,
          inputTokensMargin: estimate.margin,
          expiresAt: reservation.expiresAt.toISOString(),
        },
      });
    }
    if (c.audit && (decision.decision === 'deny' || decision.warnings.length)) {
      events.push({
        type: 'GuardDecided',
        eventId: systemEventId('decision', ctx.newId()),
        occurredAt: ctx.at,
        scopes: c.context,
        data: {
          decision: decision.decision,
          violations: decision.violations,
          warnings: decision.warnings,
          stepId: c.stepId ?? null,
        },
      });
    }
    return { decision, usage: seen, reservation, estimate, ...(adjust ? { adjust } : {}), events };
  });
}

function reservationOf(c: CheckCase, estimate: StepEstimate, stepId: string, ctx: DecisionContext): NewReservation {
  const scopeKeys = [...new Set(c.limits.map((l) => l.scopeKey))].sort();
  return {
    id: `rsv_${ctx.newId()}`,
    stepId,
    scopeKeys,
    contextKeys: c.contextKeys,
    costMicros: estimate.costMicros ?? 0,
    costUnit: estimate.costMicros === null ? '' : (estimate.costUnit ?? ''),
    inputTokens: estimate.inputTokens,
    outputTokens: estimate.outputTokens,
    rawInputTokens: estimate.rawInputTokens,
    provider: estimate.provider,
    model: estimate.model,
    createdAt: ctx.at,
    expiresAt: new Date(ctx.at.getTime() + ctx.reservationTtlMs),
  };
}

/** A scope's usage keys (the scope, and each of its windows), kept for the scopes seen lately. */
const heldKeysOf = memoized(10_000, (scopeKey: string): readonly string[] => [
  scopeKey,
  ...WINDOWS.map((w) => usageKey(scopeKey, w)),
]);

/** Adds a reservation to every window of every scope it holds, as the next usage read would. */
export function hold(usage: Map<string, UsageTotals>, r: NewReservation) {
  // Looked up by key (a scope, and each of its windows): a batch's usage holds every scope of the batch.
  for (const sk of r.scopeKeys) {
    for (const k of heldKeysOf(sk)) {
      const u = usage.get(k);
      if (!u) continue;
      u.reservedInputTokens += r.inputTokens;
      u.reservedOutputTokens += r.outputTokens;
      if (r.costUnit && r.costMicros > 0)
        u.reservedCostByUnit[r.costUnit] = (u.reservedCostByUnit[r.costUnit] ?? 0) + r.costMicros;
    }
  }
}

/** How an estimate is shown in a check's answer. */
export function estimateView(e: StepEstimate): GuardEstimateView {
  return {
    cost: e.costMicros === null ? null : e.costMicros / MICRO,
    costUnit: e.costUnit,
    priced: e.priced,
    ...(e.priceId ? { priceId: e.priceId } : {}),
    ...(e.fallback ? { fallback: e.fallback } : {}),
    inputTokens: e.inputTokens,
    outputTokens: e.outputTokens,
    inputTokensMargin: e.margin,
  };
}

/** A scope's usage as the API shows it: per unit, and in one unit where that is meaningful. */
export function scopeUsageView(scope: Scope, window: Window | null, u: UsageTotals, money: UnitRates): ScopeUsage {
  const units = new Set(
    [...Object.keys(u.costByUnit), ...Object.keys(u.reservedCostByUnit)].filter(
      (k) => (u.costByUnit[k] ?? 0) + (u.reservedCostByUnit[k] ?? 0) > 0,
    ),
  );
  // One unit: as recorded. Several: the project's unit, summing only what its rates convert.
  const unit = units.size === 0 ? null : units.size === 1 ? [...units][0] : money.base;
  const sumIn = (byUnit: Record<string, number>) =>
    unit === null
      ? 0
      : Object.entries(byUnit).reduce(
          (sum, [from, micros]) => sum + (convertMicros(micros, from, unit, money) ?? 0),
          0,
        ) / MICRO;
  const perUnit = (byUnit: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(byUnit)
        .filter(([, v]) => v > 0)
        .map(([k, v]) => [k, v / MICRO]),
    );
  return {
    scope,
    window,
    inputTokens: u.inputTokens,
    outputTokens: u.outputTokens,
    totalTokens: u.inputTokens + u.outputTokens,
    estimatedCost: sumIn(u.costByUnit),
    costUnit: unit,
    reservedCost: sumIn(u.reservedCostByUnit),
    reservedInputTokens: u.reservedInputTokens,
    reservedOutputTokens: u.reservedOutputTokens,
    unpricedEvents: u.unpricedEvents,
    costByUnit: perUnit(u.costByUnit),
    reservedCostByUnit: perUnit(u.reservedCostByUnit),
  };
}
