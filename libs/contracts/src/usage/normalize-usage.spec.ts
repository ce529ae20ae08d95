import { MAX_TOKENS, usageSchema, type Usage } from '../step-event';
import {
  fromAiSdk,
  fromAnthropic,
  fromBedrock,
  fromGemini,
  fromMastraUsageStats,
  fromOpenAI,
  type UsageCounts,
} from './normalize-usage';

// The normalizer's usage type is written out (the file imports nothing, it is copied into
// @tollgate/processors); it must stay the service's `Usage`, field for field.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const same = <T extends true>(value: T) => value;
same<Same<UsageCounts, Usage>>(true);

/** A deterministic stream of awkward values: what a provider, a proxy or a bug may send. */
function awkward(seed: number) {
  let state = seed;
  const next = () => (state = (state * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
  const values: unknown[] = [
    0,
    1,
    7,
    50,
    10_000,
    99_999_999,
    MAX_TOKENS + 5,
    2 ** 53,
    -3,
    1.5,
    Number.NaN,
    Infinity,
    null,
    undefined,
    '120',
    {},
    [],
  ];
  return () => values[Math.floor(next() * values.length)];
}

describe('the normalizers', () => {
  it('always return usage the service accepts, whatever the provider sent', () => {
    const pick = awkward(42);
    for (let i = 0; i < 500; i++) {
      const results = [
        fromOpenAI({
          prompt_tokens: pick(),
          completion_tokens: pick(),
          prompt_tokens_details: { cached_tokens: pick(), audio_tokens: pick(), cache_write_tokens: pick() },
          completion_tokens_details: { reasoning_tokens: pick() },
        } as never),
        fromOpenAI({
          input_tokens: pick(),
          output_tokens: pick(),
          input_tokens_details: { cached_tokens: pick() },
          output_tokens_details: { reasoning_tokens: pick() },
        } as never),
        fromAnthropic(
          {
            input_tokens: pick(),
            output_tokens: pick(),
            cache_read_input_tokens: pick(),
            cache_creation_input_tokens: pick(),
            cache_creation: { ephemeral_5m_input_tokens: pick(), ephemeral_1h_input_tokens: pick() },
          } as never,
          { output_tokens: pick(), input_tokens: pick() } as never,
        ),
        fromGemini({
          promptTokenCount: pick(),
          cachedContentTokenCount: pick(),
          candidatesTokenCount: pick(),
          thoughtsTokenCount: pick(),
          toolUsePromptTokenCount: pick(),
          promptTokensDetails: [
            { modality: 'AUDIO', tokenCount: pick() },
            { modality: 'IMAGE', tokenCount: pick() },
          ],
        } as never),
        fromBedrock({
          inputTokens: pick(),
          outputTokens: pick(),
          cacheReadInputTokens: pick(),
          cacheWriteInputTokens: pick(),
          cacheDetails: [{ ttl: '1h', inputTokens: pick() }],
        } as never),
        fromAiSdk(
          {
            inputTokens: pick(),
            outputTokens: pick(),
            cachedInputTokens: pick(),
            reasoningTokens: pick(),
            cacheCreationInputTokens: pick(),
          } as never,
          {
            provider: ['anthropic', 'openai.chat', 'google.generative-ai', 'amazon-bedrock', 'x'][i % 5]!,
            providerMetadata: { anthropic: { cacheCreationInputTokens: pick() } },
          },
        ),
        fromAiSdk(
          {
            inputTokens: { total: pick(), noCache: pick(), cacheRead: pick(), cacheWrite: pick() },
            outputTokens: { total: pick(), text: pick(), reasoning: pick() },
          } as never,
          { provider: 'anthropic.messages' },
        ),
        fromMastraUsageStats({
          inputTokens: pick(),
          outputTokens: pick(),
          inputDetails: { cacheRead: pick(), cacheWrite: pick(), cacheWrite1h: pick(), audio: pick(), image: pick() },
          outputDetails: { reasoning: pick() },
        } as never),
      ];
      for (const result of results) {
        const parsed = usageSchema.safeParse(result.usage);
        if (!parsed.success) throw new Error(`${JSON.stringify(result.usage)}: ${parsed.error.message}`);
        expect(result.usage.cacheWrite1hTokens ?? 0).toBeLessThanOrEqual(result.usage.cacheWriteTokens ?? 0);
      }
    }
  });

  it('read no usage at all (null, undefined, a chunk without usage) as zero tokens', () => {
    for (const result of [
      fromOpenAI(null),
      fromAnthropic(undefined),
      fromGemini(null),
      fromBedrock(undefined),
      fromAiSdk(undefined, { provider: 'openai' }),
      fromMastraUsageStats(null),
    ]) {
      expect(result).toEqual({ usage: { inputTokens: 0, outputTokens: 0 } });
    }
  });

  it('round fractional counts and clamp totals to the service’s maximum, cutting the parts to fit', () => {
    expect(
      fromAnthropic({ input_tokens: 60_000_000, cache_read_input_tokens: 60_000_000, output_tokens: 2.6 }),
    ).toEqual({ usage: { inputTokens: MAX_TOKENS, outputTokens: 3, cacheReadTokens: 60_000_000 } });
    expect(
      fromOpenAI({
        prompt_tokens: 100,
        prompt_tokens_details: { cached_tokens: 150 },
        completion_tokens: 10,
        completion_tokens_details: { reasoning_tokens: 40 },
      }),
    ).toEqual({ usage: { inputTokens: 100, outputTokens: 10, cacheReadTokens: 100, reasoningTokens: 10 } });
  });
});
