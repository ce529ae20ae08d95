import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';

/**
 * One Anthropic step as the Messages API reports it: 50 uncached input tokens, 10,000 read from
 * the prompt cache, none written, 20 output tokens. Anthropic's `input_tokens` leaves the cache out.
 */
export const ANTHROPIC_USAGE = {
  input_tokens: 50,
  cache_read_input_tokens: 10_000,
  cache_creation_input_tokens: 0,
  output_tokens: 20,
};
export const ANTHROPIC_PROVIDER = 'anthropic.messages';
export const ANTHROPIC_MODEL = 'claude-sonnet-4-20250514';

// What @ai-sdk/anthropic puts in providerMetadata, in both majors: the raw usage, and the cache writes.
const providerMetadata = {
  anthropic: { usage: ANTHROPIC_USAGE, cacheCreationInputTokens: ANTHROPIC_USAGE.cache_creation_input_tokens },
};

/**
 * The step through an AI SDK 5 provider (model spec V2): `inputTokens` is Anthropic's own (the 50
 * uncached), `cachedInputTokens` the 10,000 reads, and the writes are only in providerMetadata.
 */
const V2_USAGE = {
  inputTokens: ANTHROPIC_USAGE.input_tokens,
  outputTokens: ANTHROPIC_USAGE.output_tokens,
  totalTokens: ANTHROPIC_USAGE.input_tokens + ANTHROPIC_USAGE.output_tokens,
  cachedInputTokens: ANTHROPIC_USAGE.cache_read_input_tokens,
};

/** The step through an AI SDK 6 provider (model spec V3): totals with their parts. */
const V3_USAGE = {
  inputTokens: { total: 10_050, noCache: 50, cacheRead: 10_000, cacheWrite: 0 },
  outputTokens: { total: 20, text: 20, reasoning: undefined },
  raw: ANTHROPIC_USAGE,
};

/**
 * An Anthropic model that answers every call with one text step of {@link ANTHROPIC_USAGE}, as an
 * AI SDK 5 (`v2`) or AI SDK 6 (`v3`) provider reports it, for `generate` and `stream` alike.
 *
 * `ai` 6 exports only `MockLanguageModelV3` from `ai/test`; the V2 model is written out here
 * with the `LanguageModelV2` contract (`specificationVersion: 'v2'`, V2 finish reasons and usage),
 * which is what makes Mastra wrap it as an AI SDK 5 model.
 */
export function anthropicModel(spec: 'v2' | 'v3') {
  if (spec === 'v3') {
    return new MockLanguageModelV3({
      provider: ANTHROPIC_PROVIDER,
      modelId: ANTHROPIC_MODEL,
      doGenerate: async () =>
        ({
          content: [{ type: 'text', text: 'Cached answer.' }],
          finishReason: { unified: 'stop', raw: 'end_turn' },
          usage: V3_USAGE,
          providerMetadata,
          warnings: [],
        }) as never,
      doStream: async () =>
        ({
          stream: convertArrayToReadableStream([
            { type: 'stream-start', warnings: [] },
            { type: 'text-start', id: 't' },
            { type: 'text-delta', id: 't', delta: 'Cached answer.' },
            { type: 'text-end', id: 't' },
            { type: 'finish', finishReason: { unified: 'stop', raw: 'end_turn' }, usage: V3_USAGE, providerMetadata },
          ]),
        }) as never,
    });
  }
  return {
    specificationVersion: 'v2' as const,
    provider: ANTHROPIC_PROVIDER,
    modelId: ANTHROPIC_MODEL,
    supportedUrls: {},
    doGenerate: async () => ({
      content: [{ type: 'text', text: 'Cached answer.' }],
      finishReason: 'stop',
      usage: V2_USAGE,
      providerMetadata,
      warnings: [],
    }),
    doStream: async () => ({
      stream: convertArrayToReadableStream<unknown>([
        { type: 'stream-start', warnings: [] },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'Cached answer.' },
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: 'stop', usage: V2_USAGE, providerMetadata },
      ]),
    }),
  };
}
