import type { EffectiveLimit, UsageTotals } from './guard-decision';

/**
 * The most usage of one (scope, window) under which a check's decision stays what it was: each
 * component of the decision's inputs (see `decide`), which only ever grows with usage. Cost is
 * per unit, committed and reserved together; a unit it does not name may hold nothing.
 */
export interface UsageBound {
  /** Input tokens, committed and reserved. */
  tin: number;
  /** Output tokens, committed and reserved. */
  tout: number;
  /** Recorded steps without a price. */
  ev: number;
  /** Their input and output tokens. */
  uin: number;
  uout: number;
  /** Micro-units per unit, committed and reserved. */
  cost: Record<string, number>;
}

/** The bound of a usage: itself, as `decide` reads it. */
export function boundOf(u: UsageTotals): UsageBound {
  const cost: Record<string, number> = {};
  for (const byUnit of [u.costByUnit, u.reservedCostByUnit])
    for (const [unit, micros] of Object.entries(byUnit)) cost[unit] = (cost[unit] ?? 0) + micros;
  return {
    tin: u.inputTokens + u.reservedInputTokens,
    tout: u.outputTokens + u.reservedOutputTokens,
    ev: u.unpricedEvents,
    uin: u.unpricedInputTokens,
    uout: u.unpricedOutputTokens,
    cost,
  };
}

/** Whether a usage's bound is within another: every component at most the other's, per unit for money. */
export function withinBound(usage: UsageBound, bound: UsageBound): boolean {
  return (
    usage.tin <= bound.tin &&
    usage.tout <= bound.tout &&
    usage.ev <= bound.ev &&
    usage.uin <= bound.uin &&
    usage.uout <= bound.uout &&
    Object.entries(usage.cost).every(([unit, micros]) => micros <= 0 || micros <= (bound.cost[unit] ?? 0))
  );
}

/**
 * Whether a decision made on `usage` holds for any usage within its bounds: `decide` only grows
 * stricter as each component grows, except where money is converted — each of a unit's committed
 * and reserved amounts is rounded up on its own, so a step settling (reserved becoming committed)
 * may add a micro-unit. So: the cost limits share one unit, and the usage holds money in no other.
 */
export function decidesWithinBounds(limits: readonly EffectiveLimit[], usage: Iterable<UsageTotals>): boolean {
  const units = new Set(limits.filter((l) => l.maxCostMicros !== undefined).map((l) => l.costUnit));
  if (units.size === 0) return true;
  if (units.size > 1) return false;
  for (const u of usage)
    for (const byUnit of [u.costByUnit, u.reservedCostByUnit])
      for (const [unit, micros] of Object.entries(byUnit)) if (micros > 0 && !units.has(unit)) return false;
  return true;
}
