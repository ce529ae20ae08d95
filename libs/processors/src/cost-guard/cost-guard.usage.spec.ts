import { RequestContext } from '@mastra/core/request-context';
import { abort } from '../../test/support/messages';
import { InMemoryTollgate } from '../../test/support/in-memory-tollgate';
import { CostGuardProcessor } from './cost-guard.processor';
import type { CostGuardStepArgs } from './mastra-args';

// What the guard records is Tollgate's usage whatever the model: AI SDK 5 passes each provider's
// own meaning through, and an Anthropic step's input total leaves its cache out.
const MODEL = 'claude-sonnet-4-20250514';
const PRICES = { [`anthropic/${MODEL}`]: { inputPerMillion: 3, outputPerMillion: 15 } };
const anthropicRaw = {
  input_tokens: 50,
  cache_read_input_tokens: 10_000,
  cache_creation_input_tokens: 0,
  output_tokens: 20,
};
const V2_USAGE = {
  inputTokens: 50,
  outputTokens: 20,
  totalTokens: 70,
  cachedInputTokens: 10_000,
  raw: { inputTokens: 50, outputTokens: 20, totalTokens: 70, cachedInputTokens: 10_000 },
};
const CACHE_HIT = { inputTokens: 10_050, outputTokens: 20, cacheReadTokens: 10_000 };

function stepArgs(overrides: Partial<CostGuardStepArgs> = {}): CostGuardStepArgs {
  const requestContext = new RequestContext();
  requestContext.set('mastra__resourceId', 'r1');
  return {
    messages: [],
    abort,
    requestContext,
    state: {},
    stepNumber: 0,
    steps: [],
    model: { provider: 'anthropic.messages', modelId: MODEL, specificationVersion: 'v2' } as CostGuardStepArgs['model'],
    modelSettings: { maxOutputTokens: 500 },
    ...overrides,
  };
}

const guard = (tollgate: InMemoryTollgate) =>
  new CostGuardProcessor({ maxCost: 1, client: tollgate, logger: { warn: jest.fn() } });

describe('CostGuardProcessor records usage in Tollgate’s meaning', () => {
  it('an AI SDK 5 Anthropic step (finish chunk): 10,050 input tokens of which 10,000 cache reads, and the reservation settles', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    const g = guard(tollgate);
    const state = {};
    await g.processInputStep(stepArgs({ state }));
    const chunks = [
      {
        type: 'finish',
        payload: {
          output: { usage: V2_USAGE },
          providerMetadata: { anthropic: { usage: anthropicRaw, cacheCreationInputTokens: 0 } },
        },
      },
    ];
    await g.processLLMResponse({ chunks, stepNumber: 0, state });
    expect(tollgate.recorded.map((r) => r.event.usage)).toEqual([CACHE_HIT]);
    expect(tollgate.open).toEqual([]);
  });

  it('an AI SDK 5 Anthropic step that wrote the cache: the writes from the finish chunk’s metadata are counted', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    const g = guard(tollgate);
    const state = {};
    await g.processInputStep(stepArgs({ state }));
    const usage = { inputTokens: 12, outputTokens: 240, totalTokens: 252 };
    const chunks = [
      {
        type: 'finish',
        payload: {
          output: { usage },
          metadata: { providerMetadata: { anthropic: { cacheCreationInputTokens: 3000 } } },
        },
      },
    ];
    await g.processLLMResponse({ chunks, stepNumber: 0, state });
    expect(tollgate.recorded.map((r) => r.event.usage)).toEqual([
      { inputTokens: 3012, outputTokens: 240, cacheWriteTokens: 3000 },
    ]);
  });

  it("as an input processor only, records the step from the next step's `steps`, with its provider metadata", async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    const g = guard(tollgate);
    const state = {};
    await g.processInputStep(stepArgs({ state }));
    await g.processInputStep(
      stepArgs({
        state,
        stepNumber: 1,
        steps: [{ usage: V2_USAGE, providerMetadata: { anthropic: { cacheCreationInputTokens: 0 } } }],
      }),
    );
    expect(tollgate.recorded.map((r) => [r.event.stepIndex, r.event.usage])).toEqual([[0, CACHE_HIT]]);
  });

  it('an AI SDK 6 Anthropic step: the same usage', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    const g = guard(tollgate);
    const state = {};
    await g.processInputStep(
      stepArgs({
        state,
        model: {
          provider: 'anthropic.messages',
          modelId: MODEL,
          specificationVersion: 'v3',
        } as CostGuardStepArgs['model'],
      }),
    );
    const usage = {
      inputTokens: 10_050,
      outputTokens: 20,
      totalTokens: 10_070,
      cachedInputTokens: 10_000,
      raw: {
        inputTokens: { total: 10_050, noCache: 50, cacheRead: 10_000, cacheWrite: 0 },
        outputTokens: { total: 20, text: 20 },
      },
    };
    await g.processLLMResponse({ chunks: [{ type: 'finish', payload: { output: { usage } } }], stepNumber: 0, state });
    expect(tollgate.recorded.map((r) => r.event.usage)).toEqual([CACHE_HIT]);
  });

  it('an AI SDK 5 Gemini step: the thoughts are counted inside the output', async () => {
    const tollgate = new InMemoryTollgate({
      'google/gemini-2.5-flash': { inputPerMillion: 0.3, outputPerMillion: 2.5 },
    });
    const g = guard(tollgate);
    const state = {};
    await g.processInputStep(
      stepArgs({
        state,
        model: {
          provider: 'google.generative-ai',
          modelId: 'gemini-2.5-flash',
          specificationVersion: 'v2',
        } as CostGuardStepArgs['model'],
      }),
    );
    const usage = {
      inputTokens: 12_040,
      outputTokens: 310,
      totalTokens: 13_050,
      cachedInputTokens: 10_240,
      reasoningTokens: 700,
    };
    await g.processLLMResponse({ chunks: [{ type: 'finish', payload: { output: { usage } } }], stepNumber: 0, state });
    expect(tollgate.recorded.map((r) => r.event.usage)).toEqual([
      { inputTokens: 12_040, outputTokens: 1010, cacheReadTokens: 10_240, reasoningTokens: 700 },
    ]);
  });
});
