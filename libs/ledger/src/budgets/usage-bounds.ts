import { cloneUsage, type EffectiveLimit, type NewReservation, type UsageTotals } from './guard-decision';

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

/** The most one reservation of a batch holds: a step's worth of room above a guess. */
export interface StepRoom {
  inputTokens: number;
  outputTokens: number;
  /** Micro-units per unit. */
  cost: Record<string, number>;
}

export function stepRoom(reservations: readonly NewReservation[]): StepRoom {
  const room: StepRoom = { inputTokens: 0, outputTokens: 0, cost: {} };
  for (const r of reservations) {
    room.inputTokens = Math.max(room.inputTokens, r.inputTokens);
    room.outputTokens = Math.max(room.outputTokens, r.outputTokens);
    if (r.costUnit && r.costMicros > 0) room.cost[r.costUnit] = Math.max(room.cost[r.costUnit] ?? 0, r.costMicros);
  }
  return room;
}

/**
 * A usage with `steps` steps' worth of room: more of what moves between two checks of a budget —
 * a step settling at other counts than it held, another agent's step — tokens and money (unpriced
 * usage, rare, stays as it was).
 */
export function widened(u: UsageTotals, room: StepRoom, steps: number): UsageTotals {
  const w = cloneUsage(u);
  w.inputTokens += steps * room.inputTokens;
  w.outputTokens += steps * room.outputTokens;
  for (const [unit, micros] of Object.entries(room.cost))
    w.costByUnit[unit] = (w.costByUnit[unit] ?? 0) + steps * micros;
  return w;
}

/** The rooms tried above a guess, in steps, loosest first (see {@link loosestBounds}). */
export const ROOM_STEPS = [16, 4, 1] as const;

/**
 * The bounds, per usage key, a batch decided on a guessed usage is written within: the guess with
 * the most room of {@link ROOM_STEPS} under which `keeps` — the batch decided again on that usage
 * (a copy it may change) — finds every decision as it was; the guess itself when none does. The
 * decisions only grow stricter as usage grows (see decidesWithinBounds), so any usage within the
 * bounds gives those decisions: the usage may move between two checks without costing a round
 * trip, unless it moves far enough to matter.
 */
export function loosestBounds(
  guessed: ReadonlyMap<string, UsageTotals>,
  room: StepRoom,
  keeps: (usage: Map<string, UsageTotals>) => boolean,
): Map<string, UsageBound> {
  for (const steps of ROOM_STEPS) {
    const usage = [...guessed].map(([k, u]) => [k, widened(u, room, steps)] as const);
    if (keeps(new Map(usage.map(([k, u]) => [k, cloneUsage(u)]))))
      return new Map(usage.map(([k, u]) => [k, boundOf(u)]));
  }
  return new Map([...guessed].map(([k, u]) => [k, boundOf(u)]));
}
