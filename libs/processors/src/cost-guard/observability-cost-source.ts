import type { GuardScope, GuardWindow } from '../tollgate/guard-client';
import { SCOPE_TABLE } from '../../../contracts/src/scopes';
import type { CostGuardBreakdownEntry, CostGuardUsage } from './outcomes';

/** The observability store methods the seed-compatible mode calls (any Mastra store that has them). */
export interface ObservabilityStoreShape {
  getMetricAggregate(query: {
    name: string[];
    aggregation: 'sum';
    filters: Record<string, unknown>;
  }): Promise<{ estimatedCost?: number | null; costUnit?: string | null }>;
  getMetricBreakdown?(query: {
    name: string[];
    groupBy: string[];
    aggregation: 'sum';
    filters: Record<string, unknown>;
    limit: number;
  }): Promise<{
    groups: Array<{
      dimensions: Record<string, string | null | undefined>;
      estimatedCost?: number | null;
      costUnit?: string | null;
    }>;
  }>;
}

/** The token metrics whose estimated cost Mastra records per model call. */
export const TOKEN_COST_METRICS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];

export const WINDOW_MS: Record<GuardWindow, number> = {
  '1h': 3_600_000,
  '6h': 6 * 3_600_000,
  '24h': 24 * 3_600_000,
  '7d': 7 * 24 * 3_600_000,
  '30d': 30 * 24 * 3_600_000,
  '365d': 365 * 24 * 3_600_000,
};

/**
 * Cost spent so far, read from Mastra's observability metrics as `@mastra/core`'s own cost guard
 * does. Approximate: exporters buffer metrics, so the latest steps may not be counted yet.
 */
export class ObservabilityCostSource {
  constructor(
    private readonly store: ObservabilityStoreShape,
    private readonly now: () => number = Date.now,
  ) {}

  /** Agent-attributed cost of the scope, within the window (all of the trace for `run`). */
  async cost(scope: GuardScope, id: string, window: GuardWindow): Promise<CostGuardUsage> {
    const result = await this.store.getMetricAggregate({
      name: TOKEN_COST_METRICS,
      aggregation: 'sum',
      filters: this.filters(scope, id, window),
    });
    return { estimatedCost: result.estimatedCost ?? null, costUnit: result.costUnit ?? null };
  }

  /** Cost per provider and model; undefined when the store cannot break it down. */
  async breakdown(scope: GuardScope, id: string, window: GuardWindow): Promise<CostGuardBreakdownEntry[] | undefined> {
    if (typeof this.store.getMetricBreakdown !== 'function') return undefined;
    const result = await this.store.getMetricBreakdown({
      name: TOKEN_COST_METRICS,
      groupBy: ['provider', 'model'],
      aggregation: 'sum',
      filters: this.filters(scope, id, window),
      limit: 10,
    });
    return result.groups.map((g) => ({
      provider: g.dimensions['provider'] ?? null,
      model: g.dimensions['model'] ?? null,
      estimatedCost: g.estimatedCost ?? null,
      costUnit: g.costUnit ?? null,
    }));
  }

  private filters(scope: GuardScope, id: string, window: GuardWindow): Record<string, unknown> {
    // Mastra's metric filters name the scope ids as Tollgate's context does (the run: traceId).
    const filters: Record<string, unknown> = { [SCOPE_TABLE[scope].field]: id, entityType: 'agent' };
    if (scope !== 'run') filters['timestamp'] = { start: new Date(this.now() - WINDOW_MS[window]) };
    return filters;
  }
}
