import type { GuardConfig } from './options';
import type { ObservabilityCostSource } from './observability-cost-source';
import type { Aborting, CostGuardUsage, Notified, StepOutcomes } from './outcomes';

/**
 * The guard without a Tollgate client, as `@mastra/core`'s own: it reads the cost already spent
 * from Mastra's observability store before each step (approximate: metrics land with a delay).
 */
export class ObservabilityMode<Id extends string> {
  constructor(
    private readonly config: GuardConfig<Id>,
    private readonly source: ObservabilityCostSource,
    private readonly outcomes: StepOutcomes<Id>,
  ) {}

  /** Compares the scope's recorded cost with `maxCost` before the step's LLM call. */
  async checkStep(
    args: Aborting<Id>,
    run: Notified,
    id: string,
    maxCost: number,
    scopeKey: string | undefined,
  ): Promise<void> {
    const { source } = this;
    const { scope, window, options } = this.config;
    let cost: CostGuardUsage;
    try {
      cost = await source.cost(scope, id, window);
    } catch (error) {
      return this.outcomes.unavailable(args, maxCost, scopeKey, error);
    }
    const spent = cost.estimatedCost ?? 0;
    const unit = cost.costUnit ?? 'USD';
    // Read only for a finding that is reported: a request warns once per threshold.
    const breakdown = (threshold: 'soft' | 'hard') =>
      options.includeBreakdown && !run.notified.has(threshold)
        ? source.breakdown(scope, id, window).catch(() => undefined)
        : Promise.resolve(undefined);
    if (spent >= maxCost)
      return this.outcomes.violate(args, run, maxCost, scopeKey, {
        usage: spent,
        limit: maxCost,
        unit,
        breakdown: await breakdown('hard'),
      });
    if (options.warnAtPercent !== undefined && spent >= (maxCost * options.warnAtPercent) / 100) {
      await this.outcomes.warnSoft(run, scopeKey, {
        usage: spent,
        limit: maxCost,
        unit,
        breakdown: await breakdown('soft'),
      });
    }
  }
}
