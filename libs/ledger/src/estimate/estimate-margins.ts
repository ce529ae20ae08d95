import { normalizeProvider } from '../pricing/price-step';

/**
 * Callers estimate input tokens with one tokenizer (the processors use o200k); Claude, Gemini and
 * Llama count more tokens for the same text. A reservation holds the estimate times a margin: the
 * ratio of actual to estimated input tokens at a high quantile of what settlements of this
 * provider and model have shown, or, until enough have settled, a conservative seed per family.
 */

/**
 * Ratios are kept as a histogram: bin b holds (0.5 + 0.05 (b − 1), 0.5 + 0.05 b], bin 0 everything
 * up to 0.5 and the last bin everything above; so a ratio of exactly 1.00 lands in a bin whose
 * upper edge is 1.00.
 */
export const RATIO_BIN_WIDTH = 0.05;
export const RATIO_BIN_FLOOR = 0.5;
export const RATIO_BINS = 70;

/** Settled reservations of a model before its own ratios replace the seed. */
export const MIN_SAMPLES = 20;
export const MARGIN_QUANTILE = 0.95;
export const MIN_MARGIN = 1;
export const MAX_MARGIN = 3;

/** Measured o200k undercounts per family, rounded up; unknown families get the largest. */
const SEEDS: Record<string, number> = {
  // The processors count with o200k, OpenAI's own tokenizer.
  openai: 1,
  azure: 1,
  anthropic: 1.35,
  google: 1.25,
  gemini: 1.25,
  mistral: 1.3,
  cohere: 1.3,
};
const DEFAULT_SEED = 1.35;

export function seedMargin(provider: string): number {
  return SEEDS[normalizeProvider(provider)] ?? DEFAULT_SEED;
}

/** The upper edge of the bin where the quantile falls (so the margin covers that bin whole). */
export function marginFromBins(bins: ReadonlyMap<number, number>, provider: string): number {
  let total = 0;
  for (const n of bins.values()) total += n;
  if (total < MIN_SAMPLES) return seedMargin(provider);
  const target = Math.ceil(total * MARGIN_QUANTILE);
  let seen = 0;
  for (let b = 0; b < RATIO_BINS; b++) {
    seen += bins.get(b) ?? 0;
    if (seen >= target) return clamp(Math.round((RATIO_BIN_FLOOR + RATIO_BIN_WIDTH * b) * 100) / 100);
  }
  return MAX_MARGIN;
}

const clamp = (m: number) => Math.min(MAX_MARGIN, Math.max(MIN_MARGIN, m));

/** Input tokens to hold for an estimate: rounded up, so a margin never shrinks a reservation. */
export const heldInputTokens = (estimated: number, margin: number) => Math.ceil(estimated * margin - 1e-9);
