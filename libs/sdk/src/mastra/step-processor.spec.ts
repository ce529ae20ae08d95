import { TollgateClient } from '../client';
import { acceptAll, fakeService } from '../testing/fake-service';
import { TollgateStepProcessor } from './step-processor';

/** Runs one step through the processor as Mastra calls it, and returns the usage it recorded. */
async function recordedUsage(
  model: { provider: string; modelId: string; specificationVersion: 'v2' | 'v3' },
  usage: unknown,
  providerMetadata?: unknown,
) {
  const service = fakeService(acceptAll);
  const client = new TollgateClient({ baseUrl: 'http://tollgate.test', apiKey: 'tg_test', fetch: service.fetch });
  const processor = new TollgateStepProcessor({ client });
  const state: Record<string, unknown> = {};
  const common = {
    state,
    stepNumber: 0,
    messages: [],
    messageList: {},
    abort: () => undefined as never,
    retryCount: 0,
  } as const;
  await processor.processInputStep({ ...common, model, systemMessages: [], steps: [] } as never);
  await processor.processOutputStep({
    ...common,
    usage,
    providerMetadata,
    finishReason: 'stop',
    systemMessages: [],
    steps: [],
  } as never);
  await client.events.flush();
  await client.shutdown();
  return service.requests.flatMap((r) => r.body.events).map((e: { usage: unknown }) => e.usage);
}

describe('TollgateStepProcessor records usage in Tollgate’s meaning', () => {
  const anthropic = {
    usage: { input_tokens: 50, cache_read_input_tokens: 10_000, cache_creation_input_tokens: 0, output_tokens: 20 },
    cacheCreationInputTokens: 0,
  };

  it('an AI SDK 5 Anthropic step: the 10,000 cache reads are inside the input total, not cut down to the 50 uncached', async () => {
    const usage = {
      inputTokens: 50,
      outputTokens: 20,
      totalTokens: 70,
      cachedInputTokens: 10_000,
      raw: { inputTokens: 50, outputTokens: 20, totalTokens: 70, cachedInputTokens: 10_000 },
    };
    expect(
      await recordedUsage(
        { provider: 'anthropic.messages', modelId: 'claude-sonnet-4-20250514', specificationVersion: 'v2' },
        usage,
        { anthropic },
      ),
    ).toEqual([{ inputTokens: 10_050, outputTokens: 20, cacheReadTokens: 10_000 }]);
  });

  it('an AI SDK 5 Anthropic step that wrote the cache: the writes, only in providerMetadata, are counted', async () => {
    const usage = {
      inputTokens: 12,
      outputTokens: 240,
      totalTokens: 252,
      raw: { inputTokens: 12, outputTokens: 240, totalTokens: 252 },
    };
    expect(
      await recordedUsage(
        { provider: 'anthropic.messages', modelId: 'claude-sonnet-4-20250514', specificationVersion: 'v2' },
        usage,
        { anthropic: { cacheCreationInputTokens: 3000 } },
      ),
    ).toEqual([{ inputTokens: 3012, outputTokens: 240, cacheWriteTokens: 3000 }]);
  });

  it('an AI SDK 6 Anthropic step: the same usage', async () => {
    const raw = {
      inputTokens: { total: 10_050, noCache: 50, cacheRead: 10_000, cacheWrite: 0 },
      outputTokens: { total: 20, text: 20 },
      raw: anthropic.usage,
    };
    const usage = {
      inputTokens: 10_050,
      outputTokens: 20,
      totalTokens: 10_070,
      cachedInputTokens: 10_000,
      cacheCreationInputTokens: 0,
      raw,
    };
    expect(
      await recordedUsage(
        { provider: 'anthropic.messages', modelId: 'claude-sonnet-4-20250514', specificationVersion: 'v3' },
        usage,
        { anthropic },
      ),
    ).toEqual([{ inputTokens: 10_050, outputTokens: 20, cacheReadTokens: 10_000 }]);
  });

  it('an AI SDK 5 Gemini step: the thoughts are inside the output total', async () => {
    const usage = {
      inputTokens: 12_040,
      outputTokens: 310,
      totalTokens: 13_050,
      cachedInputTokens: 10_240,
      reasoningTokens: 700,
    };
    expect(
      await recordedUsage(
        { provider: 'google.generative-ai', modelId: 'gemini-2.5-flash', specificationVersion: 'v2' },
        usage,
      ),
    ).toEqual([{ inputTokens: 12_040, outputTokens: 1010, cacheReadTokens: 10_240, reasoningTokens: 700 }]);
  });

  it('an OpenAI step: inclusive already, recorded as it is', async () => {
    const usage = {
      inputTokens: 1200,
      outputTokens: 60,
      totalTokens: 1260,
      cachedInputTokens: 400,
      reasoningTokens: 20,
    };
    expect(
      await recordedUsage({ provider: 'openai.chat', modelId: 'gpt-4o', specificationVersion: 'v2' }, usage),
    ).toEqual([{ inputTokens: 1200, outputTokens: 60, cacheReadTokens: 400, reasoningTokens: 20 }]);
  });
});
