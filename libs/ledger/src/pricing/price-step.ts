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
  /** 1-hour cache writes (`usage.cacheWrite1hTokens`); unset: the cache-write rate above. */
  cacheWrite1hPerMillion?: number | null;
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
/** How the price ids of catalog prices start (`genai-prices:<provider>/<model>`). */
export const CATALOG_PRICE_PREFIX = `${CATALOG}:`;

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
export function overrideAt(
  overrides: readonly PriceOverrideRate[],
  provider: string,
  model: string,
  at: Date,
): PriceOverrideRate | undefined {
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

/**
 * Cost of `usage` at an override's rates; rates are per million tokens, so tokens × rate = micro-units.
 * The 1-hour cache writes are at `cacheWrite1hPerMillion`, the other writes (5 minutes) at `cacheWritePerMillion`.
 */
export function costAtRates(usage: Usage, rate: PriceOverrideRate): { input: number; output: number } {
  const cacheRead = usage.cacheReadTokens ?? 0;
  const cacheWrite = usage.cacheWriteTokens ?? 0;
  const cacheWrite1h = Math.min(usage.cacheWrite1hTokens ?? 0, cacheWrite);
  const uncached = usage.inputTokens - cacheRead - cacheWrite;
  const cacheWriteRate = rate.cacheWritePerMillion ?? rate.inputPerMillion;
  const input =
    uncached * rate.inputPerMillion +
    cacheRead * (rate.cacheReadPerMillion ?? rate.inputPerMillion) +
    (cacheWrite - cacheWrite1h) * cacheWriteRate +
    cacheWrite1h * (rate.cacheWrite1hPerMillion ?? cacheWriteRate);
  return { input, output: usage.outputTokens * rate.outputPerMillion };
}

function calcCatalog(usage: Usage, provider: string, model: string, at: Date) {
  const cacheWrite = usage.cacheWriteTokens ?? 0;
  const cacheWrite1h = Math.min(usage.cacheWrite1hTokens ?? 0, cacheWrite);
  return calcPrice(
    {
      input_tokens: usage.inputTokens,
      output_tokens: usage.outputTokens,
      cache_read_tokens: usage.cacheReadTokens ?? 0,
      // The catalog prices the 1-hour writes at the model's 1-hour rate (its 5-minute one when it has none).
      cache_write_tokens: cacheWrite,
      cache_write_5m_tokens: cacheWrite - cacheWrite1h,
      cache_write_1h_tokens: cacheWrite1h,
      input_audio_tokens: usage.audioInputTokens ?? 0,
    },
    normalizeModel(provider, model),
    { providerId: normalizeProvider(provider), timestamp: at },
  );
}

/** Cost per token of each part of the usage, for a model whose price has no tiers. */
interface LinearRates {
  priceId: string;
  uncached: number;
  cacheRead: number;
  /** 5-minute cache writes (the cache writes that are not 1-hour ones). */
  cacheWrite: number;
  cacheWrite1h: number;
  audio: number;
  output: number;
}

const M = 1_000_000;
const HOUR = 3600_000;
/** (provider, model, hour) → the linear rates in force, or null when the price is tiered or unknown. */
const ratesCache = new Map<string, LinearRates | null>();

/**
 * The catalog call costs ~10 µs per event (it matches the model against every provider's rules),
 * which at ingest rates is a core's worth of time. A price without tiers is linear in the usage,
 * so its per-token rates are measured once per hour of occurredAt, with unit usages, through the
 * catalog itself, and reused. Tiered prices (long-context surcharges) always go through the catalog.
 */
function linearRates(provider: string, model: string, at: Date): LinearRates | null | undefined {
  const key = `${provider}\u0000${model}\u0000${Math.floor(at.getTime() / HOUR)}`;
  if (ratesCache.has(key)) return ratesCache.get(key);
  const probe = calcCatalog({ inputTokens: M, outputTokens: M }, provider, model, at);
  let rates: LinearRates | null = null;
  if (probe && Object.values(probe.model_price as Record<string, unknown>).every((v) => typeof v === 'number')) {
    const inputCost = (u: Partial<Usage>) =>
      calcCatalog({ inputTokens: M, outputTokens: 0, ...u }, provider, model, at)?.input_price ?? NaN;
    rates = {
      priceId: `${CATALOG}:${probe.provider.id}/${probe.model.id}`,
      uncached: probe.input_price / M,
      output: probe.output_price / M,
      cacheRead: inputCost({ cacheReadTokens: M }) / M,
      cacheWrite: inputCost({ cacheWriteTokens: M }) / M,
      cacheWrite1h: inputCost({ cacheWriteTokens: M, cacheWrite1hTokens: M }) / M,
      audio: inputCost({ audioInputTokens: M }) / M,
    };
    if (Object.values(rates).some((v) => typeof v === 'number' && !Number.isFinite(v))) rates = null;
  }
  if (ratesCache.size > 10_000) ratesCache.clear();
  ratesCache.set(key, probe ? rates : null);
  return probe ? rates : undefined;
}

function catalogCost(
  usage: Usage,
  provider: string,
  model: string,
  at: Date,
): { input: number; output: number; priceId: string } | null {
  const rates = linearRates(provider, model, at);
  if (rates === undefined) return null;
  if (rates) {
    const cacheRead = usage.cacheReadTokens ?? 0;
    const cacheWrite = usage.cacheWriteTokens ?? 0;
    const cacheWrite1h = Math.min(usage.cacheWrite1hTokens ?? 0, cacheWrite);
    const audio = usage.audioInputTokens ?? 0;
    const uncached = Math.max(0, usage.inputTokens - cacheRead - cacheWrite - audio);
    return {
      input:
        uncached * rates.uncached +
        cacheRead * rates.cacheRead +
        (cacheWrite - cacheWrite1h) * rates.cacheWrite +
        cacheWrite1h * rates.cacheWrite1h +
        audio * rates.audio,
      output: usage.outputTokens * rates.output,
      priceId: rates.priceId,
    };
  }
  const result = calcCatalog(usage, provider, model, at);
  if (!result) return null;
  return {
    input: result.input_price,
    output: result.output_price,
    priceId: `${CATALOG}:${result.provider.id}/${result.model.id}`,
  };
}

/**
 * The tier of a tiered catalog price (long-context surcharges) that a step's input falls in, as
 * the input-token count the tier starts above (0: the base tier); null when the model's catalog
 * price has no tiers or the catalog does not know the model. The catalog applies a tier to the
 * whole step once its input tokens pass the tier's start.
 */
export function catalogTier(
  usage: Usage,
  provider: string,
  model: string,
  at: Date,
): { inputTokensAbove: number } | null {
  const result = calcCatalog(usage, provider, model, at);
  if (!result) return null;
  const starts = Object.values(result.model_price as Record<string, unknown>).flatMap((v) => {
    const tiers = v && typeof v === 'object' ? (v as { tiers?: unknown }).tiers : undefined;
    return Array.isArray(tiers) ? tiers.map((t: { start: number }) => t.start) : [];
  });
  if (!starts.length) return null;
  return { inputTokensAbove: Math.max(0, ...starts.filter((start) => usage.inputTokens > start)) };
}

/** The catalog's own answer, without the rate cache (for tests that check the cache against it). */
export function catalogCostUncached(usage: Usage, provider: string, model: string, at: Date) {
  const r = calcCatalog(usage, provider, model, at);
  return r ? { input: r.input_price, output: r.output_price } : null;
}

export { catalogCost };

/**
 * Prices one step at the price in force at its occurredAt: a provider-reported cost wins, then the
 * project's override, then the catalog. An unknown model is unpriced — never free.
 */
export function priceStep(
  event: Pick<StepUsageEvent, 'provider' | 'model' | 'usage' | 'cost'>,
  at: Date,
  overrides: readonly PriceOverrideRate[],
): PricedCost {
  const override = overrideAt(overrides, event.provider, event.model, at);
  if (event.cost) {
    // Split the reported total between input and output like the known rates would, so that
    // per-metric cost attribution still adds up to the reported total.
    const total = toMicros(event.cost.amount);
    const reference = override
      ? costAtRates(event.usage, override)
      : catalogCost(event.usage, event.provider, event.model, at);
    const refInput = reference ? reference.input : event.usage.inputTokens;
    const refTotal = reference
      ? reference.input + reference.output
      : event.usage.inputTokens + event.usage.outputTokens;
    const input = refTotal > 0 ? BigInt(Math.round((Number(total) * refInput) / refTotal)) : total;
    return {
      priced: true,
      costMicros: total,
      inputCostMicros: input,
      outputCostMicros: total - input,
      currency: event.cost.currency,
      source: 'provider',
      priceId: null,
    };
  }
  if (override) {
    const { input, output } = costAtRates(event.usage, override);
    const inputMicros = BigInt(Math.round(input));
    const outputMicros = BigInt(Math.round(output));
    return {
      priced: true,
      costMicros: inputMicros + outputMicros,
      inputCostMicros: inputMicros,
      outputCostMicros: outputMicros,
      currency: override.currency,
      source: 'override',
      priceId: `override:${override.id}`,
    };
  }
  const catalog = catalogCost(event.usage, event.provider, event.model, at);
  if (!catalog) return { priced: false };
  const inputMicros = toMicros(catalog.input);
  const outputMicros = toMicros(catalog.output);
  return {
    priced: true,
    costMicros: inputMicros + outputMicros,
    inputCostMicros: inputMicros,
    outputCostMicros: outputMicros,
    currency: 'USD',
    source: 'catalog',
    priceId: catalog.priceId,
  };
}
