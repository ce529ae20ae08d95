// Real @mastra/core agents with a mock model from ai/test, using the built @tollgate/sdk (ESM).
// Run by test/sdk/mastra.spec.ts as a plain Node process: Mastra loads parts of itself with
// dynamic import(), which jest's module sandbox cannot run.
//   node scenarios.mjs <scenario>   env: TOLLGATE_URL, TOLLGATE_KEY, TOLLGATE_SDK_DIST, RESOURCE_ID
// Prints one JSON line with what the spec asserts.
import { Mastra } from '@mastra/core';
import { Agent } from '@mastra/core/agent';
import { TokenCostControl } from '@mastra/core/processors';
import { RequestContext } from '@mastra/core/request-context';
import { MastraCompositeStore } from '@mastra/core/storage';
import { createTool } from '@mastra/core/tools';
import { MockLanguageModelV3 } from 'ai/test';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';

const dist = process.env.TOLLGATE_SDK_DIST;
const { TollgateClient } = await import(pathToFileURL(join(dist, 'esm/sdk/src/index.js')).href);
const { TollgateObservabilityStore, TollgateStepProcessor } = await import(
  pathToFileURL(join(dist, 'esm/sdk/src/mastra/index.js')).href
);

/** Calls the weather tool, then answers; usage as a provider reports it (AI SDK v6 shape). */
function weatherModel() {
  let calls = 0;
  return new MockLanguageModelV3({
    provider: 'openai.chat',
    modelId: 'gpt-4o',
    doGenerate: async () => {
      calls += 1;
      if (calls % 2 === 1) {
        return {
          content: [
            {
              type: 'tool-call',
              toolCallId: `call-${calls}`,
              toolName: 'weather',
              input: JSON.stringify({ city: 'Paris' }),
            },
          ],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage: {
            inputTokens: { total: 1200, noCache: 800, cacheRead: 400, cacheWrite: undefined },
            outputTokens: { total: 60, text: 40, reasoning: 20 },
          },
          warnings: [],
        };
      }
      return {
        content: [{ type: 'text', text: 'It is sunny in Paris.' }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: {
          inputTokens: { total: 1500, noCache: 1500, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: 12, text: 12, reasoning: undefined },
        },
        warnings: [],
      };
    },
  });
}

const weather = createTool({
  id: 'weather',
  description: 'Current weather of a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async () => ({ temperature: 21, sky: 'sunny' }),
});

function context(resourceId, threadId) {
  const ctx = new RequestContext();
  ctx.set('mastra__resourceId', resourceId);
  ctx.set('mastra__threadId', threadId);
  return ctx;
}

const tripwireOf = (res) =>
  res.tripwire
    ? {
        processorId: res.tripwire.processorId,
        retry: res.tripwire.retry,
        metadata: res.tripwire.metadata,
        reason: res.tripwire.reason,
      }
    : null;

const client = new TollgateClient({
  baseUrl: process.env.TOLLGATE_URL,
  apiKey: process.env.TOLLGATE_KEY,
  guard: { retries: 0 },
});
const resourceId = process.env.RESOURCE_ID;
const out = {};

/** Records usage costing more than $0.01 for the resource (10,000 gpt-4o input tokens = $0.025). */
async function spend(resource) {
  client.events.record({
    traceId: `seed-${resource}`,
    resourceId: resource,
    entityType: 'agent',
    entityName: 'weather-agent',
    provider: 'openai',
    model: 'gpt-4o',
    usage: { inputTokens: 10_000, outputTokens: 0 },
  });
  await client.flush();
}

switch (process.argv[2]) {
  case 'steps': {
    const steps = new TollgateStepProcessor({ client, entityName: 'weather-agent' });
    const agent = new Agent({
      id: 'weather-agent',
      name: 'Weather',
      instructions: 'Answer with the weather tool.',
      model: weatherModel(),
      tools: { weather },
      inputProcessors: [steps],
      outputProcessors: [steps],
    });
    const mastra = new Mastra({ agents: { agent }, logger: false });
    const res = await mastra
      .getAgent('agent')
      .generate('What is the weather in Paris?', { requestContext: context(resourceId, 'thread-1'), maxSteps: 5 });
    out.text = res.text;
    out.usage = { inputTokens: res.usage.inputTokens, outputTokens: res.usage.outputTokens };
    break;
  }
  case 'store-writes': {
    // What Mastra's exporters hand to the observability store: model token metrics per span.
    const store = new TollgateObservabilityStore({ client });
    const common = {
      traceId: 'trace-x',
      runId: 'run-x',
      resourceId,
      entityType: 'agent',
      entityName: 'support',
      provider: 'openai',
      model: 'gpt-4o',
      labels: {},
      timestamp: new Date(),
    };
    await store.batchCreateMetrics({
      metrics: [
        { ...common, spanId: 'span-1', name: 'mastra_model_total_input_tokens', value: 900 },
        { ...common, spanId: 'span-1', name: 'mastra_model_total_output_tokens', value: 90 },
        { ...common, spanId: 'span-1', name: 'mastra_model_input_cache_read_tokens', value: 300 },
        { ...common, spanId: 'span-2', name: 'mastra_model_total_input_tokens', value: 50 },
        { ...common, spanId: 'span-2', name: 'mastra_model_total_output_tokens', value: 5 },
        { ...common, spanId: 'span-0', name: 'mastra_agent_duration_ms', value: 1234 },
      ],
    });
    await client.flush();
    // The exporter retrying the same write records nothing twice.
    await store.batchCreateMetrics({
      metrics: [{ ...common, spanId: 'span-2', name: 'mastra_model_total_input_tokens', value: 50 }],
    });
    // Configured on a Mastra instance the Mastra way.
    const mastra = new Mastra({
      logger: false,
      storage: new MastraCompositeStore({ id: 'tollgate', domains: { observability: store } }),
    });
    out.configured = mastra.getStorage()?.stores?.observability === store;
    break;
  }
  case 'cost-control': {
    const store = new TollgateObservabilityStore({ client });
    const costControl = new TokenCostControl({ maxCost: 0.01, scope: 'resource', window: '24h' });
    const steps = new TollgateStepProcessor({ client, entityName: 'weather-agent' });
    const agent = new Agent({
      id: 'budget-agent',
      name: 'Budget',
      instructions: 'x',
      model: weatherModel(),
      tools: { weather },
      inputProcessors: [costControl, steps],
      outputProcessors: [steps],
    });
    const mastra = new Mastra({
      agents: { agent },
      logger: false,
      storage: new MastraCompositeStore({ id: 'tollgate', domains: { observability: store } }),
    });
    await spend(resourceId);
    out.blocked = tripwireOf(
      await mastra
        .getAgent('agent')
        .generate('Weather?', { requestContext: context(resourceId, 'thread-b'), maxSteps: 5 }),
    );
    out.fresh = tripwireOf(
      await mastra
        .getAgent('agent')
        .generate('Weather?', { requestContext: context(`${resourceId}-fresh`, 'thread-c'), maxSteps: 5 }),
    );
    break;
  }
  case 'guard-reserve': {
    const steps = new TollgateStepProcessor({
      client,
      entityName: 'weather-agent',
      guard: { reserve: true, limits: [{ scope: 'resource', maxCost: 100 }] },
    });
    const agent = new Agent({
      id: 'guarded',
      name: 'Guarded',
      instructions: 'x',
      model: weatherModel(),
      tools: { weather },
      inputProcessors: [steps],
      outputProcessors: [steps],
      errorProcessors: [steps],
    });
    const res = await new Mastra({ agents: { agent }, logger: false })
      .getAgent('agent')
      .generate('Weather?', { requestContext: context(resourceId, 't'), maxSteps: 5 });
    out.text = res.text;
    out.tripwire = tripwireOf(res);
    break;
  }
  case 'guard-deny': {
    await spend(resourceId);
    const steps = new TollgateStepProcessor({
      client,
      entityName: 'weather-agent',
      guard: { limits: [{ scope: 'resource', window: '24h', maxCost: 0.01 }] },
    });
    const agent = new Agent({
      id: 'denied',
      name: 'Denied',
      instructions: 'x',
      model: weatherModel(),
      tools: { weather },
      inputProcessors: [steps],
      outputProcessors: [steps],
    });
    out.tripwire = tripwireOf(
      await new Mastra({ agents: { agent }, logger: false })
        .getAgent('agent')
        .generate('Weather?', { requestContext: context(resourceId, 't'), maxSteps: 5 }),
    );
    break;
  }
  case 'fail-closed': {
    // The guard is unreachable: the caller's failMode decides, and a deny is Mastra's TripWire.
    const offline = new TollgateClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'tg_offline', guard: { retries: 0 } });
    const model = weatherModel();
    const steps = new TollgateStepProcessor({ client: offline, guard: { failMode: 'closed' } });
    const agent = new Agent({
      id: 'offline',
      name: 'Offline',
      instructions: 'x',
      model,
      tools: { weather },
      inputProcessors: [steps],
      outputProcessors: [steps],
    });
    out.tripwire = tripwireOf(
      await new Mastra({ agents: { agent }, logger: false }).getAgent('agent').generate('Weather?', { maxSteps: 5 }),
    );
    out.modelCalls = model.doGenerateCalls.length;
    await offline.shutdown({ timeoutMs: 100 });
    break;
  }
  default:
    throw new Error(`unknown scenario ${process.argv[2]}`);
}
await client.shutdown();
out.stats = client.events.stats;
process.stdout.write(JSON.stringify(out) + '\n');
