import { systemEventId, type StepCost } from '../events';
import { priceStep, type PricedCost, type PriceOverrideRate } from '../pricing/price-step';
import type { CorrectionRow } from './append-repriced-steps.sql';
import type { StepWithCost } from './step-costs.sql';

export type RepriceDecision =
  { kind: 'provider_reported' } | { kind: 'unchanged' } | { kind: 'changed'; correction: CorrectionRow };

export const UNPRICED: StepCost = {
  costMicros: null,
  inputCostMicros: null,
  outputCostMicros: null,
  costUnit: null,
  priceId: null,
  source: null,
};

/** A price as a step's cost record. */
export function stepCostOf(cost: PricedCost): StepCost {
  if (!cost.priced) return UNPRICED;
  return {
    costMicros: Number(cost.costMicros),
    inputCostMicros: Number(cost.inputCostMicros),
    outputCostMicros: Number(cost.outputCostMicros),
    costUnit: cost.currency,
    priceId: cost.priceId,
    source: cost.source === 'provider' ? null : cost.source,
  };
}

const latestOf = (step: StepWithCost): StepCost =>
  step.latest.costMicros === null
    ? UNPRICED
    : {
        costMicros: step.latest.costMicros,
        inputCostMicros: step.latest.inputCostMicros,
        outputCostMicros: step.latest.outputCostMicros,
        costUnit: step.latest.costUnit,
        priceId: step.latest.priceId,
        source: step.latest.source === 'override' || step.latest.source === 'catalog' ? step.latest.source : null,
      };

const sameCost = (a: StepCost, b: StepCost) =>
  a.costMicros === b.costMicros &&
  a.inputCostMicros === b.inputCostMicros &&
  a.outputCostMicros === b.outputCostMicros &&
  a.costUnit === b.costUnit &&
  a.priceId === b.priceId;

/**
 * Prices a stored step again with the prices in force at its occurredAt (the project's overrides,
 * then the catalog — as ingest does) and compares the result with its latest cost. A
 * provider-reported cost is the provider's bill: it is never repriced.
 */
export function decideReprice(step: StepWithCost, overrides: readonly PriceOverrideRate[]): RepriceDecision {
  if (step.providerReported) return { kind: 'provider_reported' };
  const next = stepCostOf(
    priceStep({ provider: step.provider, model: step.model, usage: step.usage }, step.occurredAt, overrides),
  );
  const old = latestOf(step);
  if (sameCost(old, next)) return { kind: 'unchanged' };
  const sequence = step.sequence + 1;
  return {
    kind: 'changed',
    correction: {
      eventId: systemEventId('reprice', step.eventId, String(sequence)),
      stepEventId: step.eventId,
      stepPosition: step.position,
      occurredAt: step.occurredAt,
      sequence,
      old,
      new: next,
    },
  };
}

/** What a reprice did (or, in a dry run, would do). */
export interface RepriceSummary {
  dryRun: boolean;
  from: string;
  to: string;
  provider: string | null;
  model: string | null;
  /** Steps read in the range. */
  scanned: number;
  /** Corrections appended (a dry run: that would be). */
  repriced: number;
  unchanged: number;
  /** Steps with a provider-reported cost, never repriced. */
  providerReported: number;
  /** Repriced steps that had no price and have one now, and the reverse. */
  newlyPriced: number;
  newlyUnpriced: number;
  /** The sum of `new − old` per cost unit; units whose sum is 0 are left out. */
  deltaByUnit: Record<string, { costMicros: number; cost: number }>;
  /** Transactions that read steps. */
  batches: number;
}

/** Adds up a reprice's batches (pure). */
export class RepriceTally {
  private readonly counts = {
    scanned: 0,
    repriced: 0,
    unchanged: 0,
    providerReported: 0,
    newlyPriced: 0,
    newlyUnpriced: 0,
    batches: 0,
  };
  private readonly delta = new Map<string, number>();

  constructor(private readonly request: { dryRun: boolean; from: Date; to: Date; provider?: string; model?: string }) {}

  /** One batch: its decisions, and (unless a dry run) the ids of the corrections that were appended. */
  add(decisions: readonly RepriceDecision[], appended: ReadonlySet<string> | null): void {
    if (decisions.length) this.counts.batches += 1;
    this.counts.scanned += decisions.length;
    for (const d of decisions) {
      if (d.kind === 'provider_reported') this.counts.providerReported += 1;
      // A correction another reprice appended first: that reprice counts it.
      else if (d.kind === 'unchanged' || (appended && !appended.has(d.correction.eventId))) this.counts.unchanged += 1;
      else {
        const { old, new: next } = d.correction;
        this.counts.repriced += 1;
        if (old.costMicros === null && next.costMicros !== null) this.counts.newlyPriced += 1;
        if (old.costMicros !== null && next.costMicros === null) this.counts.newlyUnpriced += 1;
        if (old.costMicros !== null)
          this.delta.set(old.costUnit!, (this.delta.get(old.costUnit!) ?? 0) - old.costMicros);
        if (next.costMicros !== null)
          this.delta.set(next.costUnit!, (this.delta.get(next.costUnit!) ?? 0) + next.costMicros);
      }
    }
  }

  summary(): RepriceSummary {
    const r = this.request;
    const deltaByUnit: RepriceSummary['deltaByUnit'] = {};
    for (const [unit, micros] of [...this.delta].sort(([a], [b]) => (a < b ? -1 : 1)))
      if (micros !== 0) deltaByUnit[unit] = { costMicros: micros, cost: micros / 1e6 };
    return {
      dryRun: r.dryRun,
      from: r.from.toISOString(),
      to: r.to.toISOString(),
      provider: r.provider ?? null,
      model: r.model ?? null,
      ...this.counts,
      deltaByUnit,
    };
  }
}
