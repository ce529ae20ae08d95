import { calcPrice } from '@pydantic/genai-prices';
import type { StepUsageEvent, Usage } from '@tollgate/contracts';

/** A project's own price for a model, in currency units per million tokens, from `effectiveFrom` on. */
export interface PriceOverrideRate {
  id: string;
  provider: string;
  model: string;
  effectiveFrom: Date;
  currency: string;
  inputPerMillion: number;
  outputPerMillion: number;
  cacheReadPerMillion?: number | null;
  cacheWritePerMillion?: number | null;
}

export type PricedCost =
  | {
      priced: true;
      /** Whole cost in micro-units of `currency` (1 USD = 1,000,000). */
      costMicros: bigint;
      inputCostMicros: bigint;
      outputCostMicros: bigint;
      currency: string;
      source: 'provider' | 'override' | 'catalog';
      priceId: string | null;
    }
  | { priced: false };

const CATALOG = 'genai-prices';

/**
 * Agents report providers the way their SDK names them (`openai.responses`, `anthropic.messages`,
 * `google.generative-ai`); the catalog knows `openai`, `anthropic`, `google`.
 */
export function normalizeProvider(provider: string): string {
  const base = provider.toLowerCase().split(/[./:]/)[0];
  return base === 'google-vertex' || base === 'vertex' ? 'google' : base;
}

/** `openai/gpt-4o` and `gpt-4o` name the same model. */
export function normalizeModel(provider: string, model: string): string {
  const prefix = `${normalizeProvider(provider)}/`;
  return model.toLowerCase().startsWith(prefix) ? model.slice(prefix.length) : model;
}

const toMicros = (amount: number): bigint => BigInt(Math.round(amount * 1_000_000));

/** Picks the override in force at `at`: the latest effectiveFrom not after it. */
export function overrideAt(overrides: readonly PriceOverrideRate[], provider: string, model: string, at: Date): PriceOverrideRate | undefined {
  const p = normalizeProvider(provider);
  const m = normalizeModel(provider, model);
  let best: PriceOverrideRate | undefined;
  for (const o of overrides) {
    if (normalizeProvider(o.provider) !== p || normalizeModel(o.provider, o.model) !== m) continue;
    if (o.effectiveFrom.getTime() > at.getTime()) continue;
    if (!best || o.effectiveFrom.getTime() > best.effectiveFrom.getTime()) best = o;
  }
  return best;
}

/** Cost of `usage` at an override's rates; rates are per million tokens, so tokens × rate = micro-units. */
export function costAtRates(usage: Usage, rate: PriceOverrideRate): { input: number; output: number } {
  const cacheRead = usage.cacheReadTokens ?? 0;
  const cacheWrite = usage.cacheWriteTokens ?? 0;
  const uncached = usage.inputTokens - cacheRead - cacheWrite;
  const input =
    uncached * rate.inputPerMillion +
    cacheRead * (rate.cacheReadPerMillion ?? rate.inputPerMillion) +
    cacheWrite * (rate.cacheWritePerMillion ?? rate.inputPerMillion);
  return { input, output: usage.outputTokens * rate.outputPerMillion };
}

function catalogCost(usage: Usage, provider: string, model: string, at: Date) {
  const result = calcPrice(
    {
      input_tokens: usage.inputTokens,
      output_tokens: usage.outputTokens,
      cache_read_tokens: usage.cacheReadTokens ?? 0,
      cache_write_tokens: usage.cacheWriteTokens ?? 0,
      input_audio_tokens: usage.audioInputTokens ?? 0,
    },
    normalizeModel(provider, model),
    { providerId: normalizeProvider(provider), timestamp: at },
  );
  if (!result) return null;
  return { input: result.input_price, output: result.output_price, priceId: `${CATALOG}:${result.provider.id}/${result.model.id}` };
}

/**
 * Prices one step at the price in force at its occurredAt: a provider-reported cost wins, then the
 * project's override, then the catalog. An unknown model is unpriced — never free.
 */
export function priceStep(event: Pick<StepUsageEvent, 'provider' | 'model' | 'usage' | 'cost'>, at: Date, overrides: readonly PriceOverrideRate[]): PricedCost {
  const override = overrideAt(overrides, event.provider, event.model, at);
  if (event.cost) {
    // Split the reported total between input and output like the known rates would, so that
    // per-metric cost attribution still adds up to the reported total.
    const total = toMicros(event.cost.amount);
    const reference = override ? costAtRates(event.usage, override) : catalogCost(event.usage, event.provider, event.model, at);
    const refInput = reference ? reference.input : event.usage.inputTokens;
    const refTotal = reference ? reference.input + reference.output : event.usage.inputTokens + event.usage.outputTokens;
    const input = refTotal > 0 ? BigInt(Math.round((Number(total) * refInput) / refTotal)) : total;
    return { priced: true, costMicros: total, inputCostMicros: input, outputCostMicros: total - input, currency: event.cost.currency, source: 'provider', priceId: null };
  }
  if (override) {
    const { input, output } = costAtRates(event.usage, override);
    const inputMicros = BigInt(Math.round(input));
    const outputMicros = BigInt(Math.round(output));
    return { priced: true, costMicros: inputMicros + outputMicros, inputCostMicros: inputMicros, outputCostMicros: outputMicros, currency: override.currency, source: 'override', priceId: `override:${override.id}` };
  }
  const catalog = catalogCost(event.usage, event.provider, event.model, at);
  if (!catalog) return { priced: false };
  const inputMicros = toMicros(catalog.input);
  const outputMicros = toMicros(catalog.output);
  return { priced: true, costMicros: inputMicros + outputMicros, inputCostMicros: inputMicros, outputCostMicros: outputMicros, currency: 'USD', source: 'catalog', priceId: catalog.priceId };
}
