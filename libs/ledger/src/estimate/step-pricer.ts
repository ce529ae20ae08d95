import { Injectable } from '@nestjs/common';
import type { GuardEstimate } from '@tollgate/contracts';
import { PrismaService } from '@tollgate/database';
import type { StepEstimate } from '../budgets/guard-decision';
import type { ProjectSettings } from '../project-settings/project-settings.sql';
import { normalizeModel, normalizeProvider, priceStep } from '../pricing/price-step';
import { heldInputTokens, marginFromBins } from './estimate-margins';
import { readEstimateRatios } from './estimate-ratios.sql';

/** How long a learned margin is used before settlements are read again. */
const MARGIN_TTL_MS = 10_000;

/**
 * What a step will cost before it runs — the one function behind the guard's reservations and
 * `POST /v1/estimate`: input tokens times the margin this provider's tokenizer needs (learned from
 * settled reservations), priced with the project's overrides or the catalog, or with the project's
 * fallback rate when the model has none.
 */
@Injectable()
export class StepPricer {
  private readonly margins = new Map<string, { at: number; margin: Promise<number> }>();

  constructor(private readonly prisma: PrismaService) {}

  async price(projectId: string, e: GuardEstimate, settings: ProjectSettings, now: Date): Promise<StepEstimate> {
    const margin = await this.marginFor(projectId, e.provider, e.model);
    const inputTokens = heldInputTokens(e.inputTokens, margin);
    const base = {
      provider: e.provider,
      model: e.model,
      rawInputTokens: e.inputTokens,
      inputTokens,
      outputTokens: e.maxOutputTokens,
      margin,
    };
    const priced = (outputTokens: number) =>
      priceStep(
        { provider: e.provider, model: e.model, usage: { inputTokens, outputTokens } },
        now,
        settings.overrides,
      );
    const cost = priced(e.maxOutputTokens);
    if (cost.priced) {
      // The same price for fewer output tokens, when the guard shrinks the step (the currency cannot change).
      const costAt = (outputTokens: number) => {
        const c = priced(outputTokens);
        return c.priced && c.currency === cost.currency ? Number(c.costMicros) : null;
      };
      return {
        ...base,
        costMicros: Number(cost.costMicros),
        costUnit: cost.currency,
        priced: true,
        ...(cost.priceId ? { priceId: cost.priceId } : {}),
        costAt,
      };
    }
    if (settings.unpricedPolicy === 'fallback' && settings.fallback) {
      const f = settings.fallback;
      const costAt = (outputTokens: number) =>
        Math.ceil(inputTokens * f.inputPerMillion + outputTokens * f.outputPerMillion);
      return {
        ...base,
        costMicros: costAt(e.maxOutputTokens),
        costUnit: f.currency,
        priced: false,
        fallback: 'project',
        costAt,
      };
    }
    return { ...base, costMicros: null, costUnit: null, priced: false };
  }

  private marginFor(projectId: string, provider: string, model: string): Promise<number> {
    const p = normalizeProvider(provider);
    const m = normalizeModel(provider, model);
    const key = `${projectId}\u001f${p}\u001f${m}`;
    const cached = this.margins.get(key);
    if (cached && Date.now() - cached.at < MARGIN_TTL_MS) return cached.margin;
    if (this.margins.size > 10_000) this.margins.clear();
    const margin = readEstimateRatios(this.prisma.sql, projectId, p, m).then((bins) => marginFromBins(bins, p));
    this.margins.set(key, { at: Date.now(), margin });
    margin.catch(() => this.margins.delete(key));
    return margin;
  }
}
