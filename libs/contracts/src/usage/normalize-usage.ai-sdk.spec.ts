import { usageSchema } from '../step-event';
import { fromAiSdk, fromMastraUsageStats, type NormalizedUsage } from './normalize-usage';

// Fixtures: the usage the AI SDK (5: model spec V2, 6: V3) and Mastra hand over for one step, as
// each provider package fills it, with the usage Tollgate must record.

function expectUsage(result: NormalizedUsage, usage: NormalizedUsage['usage']) {
  expect(result).toEqual({ usage });
  expect(usageSchema.safeParse(result.usage).success).toBe(true);
}

// The Anthropic step of the issue: 50 uncached, 10,000 cache reads, no writes, 20 output.
const anthropicRaw = {
  input_tokens: 50,
  cache_read_input_tokens: 10_000,
  cache_creation_input_tokens: 0,
  output_tokens: 20,
};
const anthropicMetadata = { anthropic: { usage: anthropicRaw, cacheCreationInputTokens: 0 } };
const CACHE_HIT = { inputTokens: 10_050, outputTokens: 20, cacheReadTokens: 10_000 };

describe('fromAiSdk, AI SDK 5 (model spec V2): each provider’s own meaning', () => {
  it('anthropic: inputTokens leaves out cachedInputTokens (and the writes in providerMetadata); both are added', () => {
    const usage = { inputTokens: 50, outputTokens: 20, totalTokens: 70, cachedInputTokens: 10_000 };
    expectUsage(fromAiSdk(usage, { provider: 'anthropic.messages', providerMetadata: anthropicMetadata }), CACHE_HIT);
  });

  it('anthropic cache write: the writes are only in providerMetadata.anthropic.cacheCreationInputTokens; the raw usage has the 5m / 1h split', () => {
    const raw = {
      input_tokens: 2048,
      cache_read_input_tokens: 1800,
      cache_creation_input_tokens: 248,
      output_tokens: 503,
      cache_creation: { ephemeral_5m_input_tokens: 148, ephemeral_1h_input_tokens: 100 },
    };
    const usage = { inputTokens: 2048, outputTokens: 503, totalTokens: 2551, cachedInputTokens: 1800 };
    expectUsage(
      fromAiSdk(usage, {
        provider: 'anthropic.messages',
        providerMetadata: { anthropic: { usage: raw, cacheCreationInputTokens: 248 } },
      }),
      { inputTokens: 4096, outputTokens: 503, cacheReadTokens: 1800, cacheWriteTokens: 248, cacheWrite1hTokens: 100 },
    );
  });

  it('anthropic on Vertex (vertex.anthropic.messages) means what Anthropic means', () => {
    expectUsage(
      fromAiSdk(
        { inputTokens: 50, outputTokens: 20, cachedInputTokens: 10_000 },
        { provider: 'vertex.anthropic.messages' },
      ),
      CACHE_HIT,
    );
  });

  it('bedrock: inputTokens leaves out cache reads and writes; the writes are in providerMetadata.bedrock.usage', () => {
    const usage = { inputTokens: 12, outputTokens: 240, totalTokens: 252, cachedInputTokens: 400 };
    expectUsage(
      fromAiSdk(usage, {
        provider: 'amazon-bedrock',
        providerMetadata: { bedrock: { usage: { cacheWriteInputTokens: 3000 } } },
      }),
      { inputTokens: 3412, outputTokens: 240, cacheReadTokens: 400, cacheWriteTokens: 3000 },
    );
  });

  it('openai: inputTokens includes cachedInputTokens and outputTokens includes reasoningTokens, as Tollgate counts', () => {
    const usage = {
      inputTokens: 2006,
      outputTokens: 300,
      totalTokens: 2306,
      cachedInputTokens: 1920,
      reasoningTokens: 256,
    };
    expectUsage(fromAiSdk(usage, { provider: 'openai.chat' }), {
      inputTokens: 2006,
      outputTokens: 300,
      cacheReadTokens: 1920,
      reasoningTokens: 256,
    });
    expectUsage(fromAiSdk(usage, { provider: 'openai.responses' }), {
      inputTokens: 2006,
      outputTokens: 300,
      cacheReadTokens: 1920,
      reasoningTokens: 256,
    });
  });

  it('google: inputTokens includes the cached content, outputTokens leaves the thoughts out; they are added', () => {
    const usage = {
      inputTokens: 12_040,
      outputTokens: 310,
      totalTokens: 13_050,
      cachedInputTokens: 10_240,
      reasoningTokens: 700,
    };
    const expected = { inputTokens: 12_040, outputTokens: 1010, cacheReadTokens: 10_240, reasoningTokens: 700 };
    expectUsage(fromAiSdk(usage, { provider: 'google.generative-ai' }), expected);
    expectUsage(fromAiSdk(usage, { provider: 'google.vertex.chat' }), expected);
  });

  it('an unknown provider is named by its provider metadata', () => {
    expectUsage(
      fromAiSdk(
        { inputTokens: 50, outputTokens: 20, cachedInputTokens: 10_000 },
        { provider: 'unknown', providerMetadata: anthropicMetadata },
      ),
      CACHE_HIT,
    );
    expectUsage(
      fromAiSdk(
        { inputTokens: 900, outputTokens: 42, reasoningTokens: 120 },
        { provider: '', providerMetadata: { google: { usageMetadata: {} } } },
      ),
      { inputTokens: 900, outputTokens: 162, reasoningTokens: 120 },
    );
  });

  it('a provider of unknown meaning counts as inclusive, unless its cache is more than its input total', () => {
    expectUsage(
      fromAiSdk({ inputTokens: 1200, outputTokens: 48, cachedInputTokens: 1024 }, { provider: 'openrouter' }),
      { inputTokens: 1200, outputTokens: 48, cacheReadTokens: 1024 },
    );
    expectUsage(
      fromAiSdk({ inputTokens: 50, outputTokens: 20, cachedInputTokens: 10_000 }, { provider: 'some-proxy' }),
      CACHE_HIT,
    );
  });

  it('Mastra’s usage of a V2 step (a flat raw, as Mastra copies it) keeps the provider’s meaning', () => {
    const usage = {
      inputTokens: 50,
      outputTokens: 20,
      totalTokens: 70,
      cachedInputTokens: 10_000,
      raw: { inputTokens: 50, outputTokens: 20, totalTokens: 70, cachedInputTokens: 10_000 },
    };
    expectUsage(
      fromAiSdk(usage, { provider: 'anthropic.messages', providerMetadata: anthropicMetadata, specVersion: 'v2' }),
      CACHE_HIT,
    );
  });
});

describe('fromAiSdk, AI SDK 6 (model spec V3): totals with their parts', () => {
  it('anthropic: inputTokens.total already includes cacheRead and cacheWrite', () => {
    const usage = {
      inputTokens: { total: 10_050, noCache: 50, cacheRead: 10_000, cacheWrite: 0 },
      outputTokens: { total: 20, text: 20, reasoning: undefined },
      raw: anthropicRaw,
    };
    expectUsage(fromAiSdk(usage, { provider: 'anthropic.messages', providerMetadata: anthropicMetadata }), CACHE_HIT);
  });

  it('anthropic cache write: the split comes from the raw usage', () => {
    const raw = {
      input_tokens: 2048,
      cache_read_input_tokens: 1800,
      cache_creation_input_tokens: 248,
      output_tokens: 503,
      cache_creation: { ephemeral_5m_input_tokens: 148, ephemeral_1h_input_tokens: 100 },
    };
    const usage = {
      inputTokens: { total: 4096, noCache: 2048, cacheRead: 1800, cacheWrite: 248 },
      outputTokens: { total: 503, text: 503, reasoning: undefined },
      raw,
    };
    expectUsage(fromAiSdk(usage, { provider: 'anthropic.messages' }), {
      inputTokens: 4096,
      outputTokens: 503,
      cacheReadTokens: 1800,
      cacheWriteTokens: 248,
      cacheWrite1hTokens: 100,
    });
  });

  it('google: outputTokens.total already includes the reasoning', () => {
    const usage = {
      inputTokens: { total: 12_040, noCache: 1800, cacheRead: 10_240, cacheWrite: undefined },
      outputTokens: { total: 1010, text: 310, reasoning: 700 },
    };
    expectUsage(fromAiSdk(usage, { provider: 'google.generative-ai' }), {
      inputTokens: 12_040,
      outputTokens: 1010,
      cacheReadTokens: 10_240,
      reasoningTokens: 700,
    });
  });

  it('bedrock: the split comes from cacheDetails in providerMetadata', () => {
    const usage = {
      inputTokens: { total: 3012, noCache: 12, cacheRead: 0, cacheWrite: 3000 },
      outputTokens: { total: 240, text: 240, reasoning: undefined },
    };
    const providerMetadata = {
      bedrock: {
        usage: {
          cacheWriteInputTokens: 3000,
          cacheDetails: [
            { ttl: '1h', inputTokens: 2000 },
            { ttl: '5m', inputTokens: 1000 },
          ],
        },
      },
    };
    expectUsage(fromAiSdk(usage, { provider: 'amazon-bedrock', providerMetadata }), {
      inputTokens: 3012,
      outputTokens: 240,
      cacheWriteTokens: 3000,
      cacheWrite1hTokens: 2000,
    });
  });

  it('a missing total is the sum of its parts', () => {
    const usage = {
      inputTokens: { total: undefined, noCache: 50, cacheRead: 10_000, cacheWrite: 0 },
      outputTokens: { total: undefined, text: 12, reasoning: 8 },
    };
    expectUsage(fromAiSdk(usage, { provider: 'anthropic.messages' }), {
      inputTokens: 10_050,
      outputTokens: 20,
      cacheReadTokens: 10_000,
      reasoningTokens: 8,
    });
  });

  it('the specVersion hint does not override a V3 shape', () => {
    const usage = {
      inputTokens: { total: 10_050, noCache: 50, cacheRead: 10_000, cacheWrite: 0 },
      outputTokens: { total: 20, text: 20 },
    };
    expectUsage(fromAiSdk(usage, { provider: 'anthropic', specVersion: 'v2' }), CACHE_HIT);
  });

  it('a V2-wrapped V3 usage ({ total: { total, … } }, as AI SDK 7 nests it) is read at its innermost object', () => {
    const usage = {
      inputTokens: { total: { total: 10_050, noCache: 50, cacheRead: 10_000, cacheWrite: 0 } },
      outputTokens: { total: { total: 20, text: 20 } },
    };
    expectUsage(fromAiSdk(usage as never, { provider: 'anthropic.messages' }), CACHE_HIT);
  });

  it('Mastra’s usage of a V3 step (flat, with the V3 usage in raw) is read from raw', () => {
    const usage = {
      inputTokens: 10_050,
      outputTokens: 20,
      totalTokens: 10_070,
      cachedInputTokens: 10_000,
      cacheCreationInputTokens: 0,
      raw: {
        inputTokens: { total: 10_050, noCache: 50, cacheRead: 10_000, cacheWrite: 0 },
        outputTokens: { total: 20, text: 20 },
        raw: anthropicRaw,
      },
    };
    expectUsage(
      fromAiSdk(usage, { provider: 'anthropic.messages', providerMetadata: anthropicMetadata, specVersion: 'v3' }),
      CACHE_HIT,
    );
    // Even when the model advertises V2 (Mastra's model router does, and forwards V3 usage).
    expectUsage(fromAiSdk(usage, { provider: 'anthropic', specVersion: 'v2' }), CACHE_HIT);
  });

  it('Mastra’s flat usage of a V3 step without raw: specVersion v3 says its totals are inclusive', () => {
    const usage = {
      inputTokens: 4096,
      outputTokens: 503,
      cachedInputTokens: 1800,
      cacheCreationInputTokens: 248,
      cacheCreationInputTokens5m: 148,
      cacheCreationInputTokens1h: 100,
    };
    expectUsage(fromAiSdk(usage, { provider: 'anthropic.messages', specVersion: 'v3' }), {
      inputTokens: 4096,
      outputTokens: 503,
      cacheReadTokens: 1800,
      cacheWriteTokens: 248,
      cacheWrite1hTokens: 100,
    });
  });

  it('an AI SDK 6 result’s LanguageModelUsage (inputTokenDetails / outputTokenDetails) has inclusive totals', () => {
    const usage = {
      inputTokens: 10_050,
      inputTokenDetails: { noCacheTokens: 50, cacheReadTokens: 10_000, cacheWriteTokens: 0 },
      outputTokens: 20,
      outputTokenDetails: { textTokens: 20, reasoningTokens: undefined },
      totalTokens: 10_070,
      raw: anthropicRaw,
    };
    expectUsage(fromAiSdk(usage, { provider: 'anthropic.messages' }), CACHE_HIT);
  });
});

describe('fromMastraUsageStats (Mastra’s span usage and token metrics)', () => {
  it('takes an inclusive total as it is', () => {
    expectUsage(
      fromMastraUsageStats({
        inputTokens: 1000,
        outputTokens: 200,
        inputDetails: { text: 600, cacheRead: 400 },
        outputDetails: { text: 150, reasoning: 50 },
      }),
      { inputTokens: 1000, outputTokens: 200, cacheReadTokens: 400, reasoningTokens: 50 },
    );
  });

  it('adds the cache to an input total that evidently left it out (an AI SDK 5 Anthropic step), instead of cutting the reads to fit', () => {
    expectUsage(
      fromMastraUsageStats({
        inputTokens: 50,
        outputTokens: 20,
        inputDetails: { text: 0, cacheRead: 10_000, cacheWrite: 0 },
      }),
      CACHE_HIT,
    );
  });

  it('adds the reasoning to an output total that evidently left it out (an AI SDK 5 Gemini step)', () => {
    expectUsage(
      fromMastraUsageStats({ inputTokens: 900, outputTokens: 42, outputDetails: { text: 0, reasoning: 120 } }),
      { inputTokens: 900, outputTokens: 162, reasoningTokens: 120 },
    );
  });

  it('carries the 5m / 1h split of the cache writes beside the usage', () => {
    expectUsage(
      fromMastraUsageStats({
        inputTokens: 4096,
        outputTokens: 503,
        inputDetails: { cacheRead: 1800, cacheWrite: 248, cacheWrite5m: 148, cacheWrite1h: 100 },
      }),
      { inputTokens: 4096, outputTokens: 503, cacheReadTokens: 1800, cacheWriteTokens: 248, cacheWrite1hTokens: 100 },
    );
  });
});
