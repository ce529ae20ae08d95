import { Agent } from '@mastra/core/agent';
import { TokenCostControl as MastraTokenCostControl } from '@mastra/core/processors';
import { RequestContext } from '@mastra/core/request-context';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { CostGuardProcessor, TokenCostControl, type CostGuardOptions } from '../src';
import { InMemoryTollgate } from './support/in-memory-tollgate';
import { scriptedModel } from './support/scripted-model';

type Tripwire = { reason: string; retry?: boolean; metadata?: unknown; processorId?: string };
const modes = ['generate', 'stream'] as const;

function contextFor(resourceId: string) {
  const requestContext = new RequestContext();
  requestContext.set('mastra__resourceId', resourceId);
  return requestContext;
}

/** One run of a one-step agent (a text answer) with `processor` as its only input processor. */
async function run(
  processor: unknown,
  mode: (typeof modes)[number],
  resourceId = 'r1',
): Promise<{ text: string; tripwire?: Tripwire; calls: number }> {
  const { model, calls } = scriptedModel([{ text: ['Hello ', 'there.'], usage: { input: 10, output: 5 } }]);
  const agent = new Agent({
    id: 'guarded',
    name: 'guarded',
    instructions: 'Say hello.',
    model,
    inputProcessors: [processor as never],
  });
  const options = { requestContext: contextFor(resourceId), modelSettings: { maxOutputTokens: 100 } };
  if (mode === 'generate') {
    const result = await agent.generate('Hi', options);
    return { text: result.text, tripwire: result.tripwire as Tripwire | undefined, calls: calls() };
  }
  const stream = await agent.stream('Hi', options);
  let tripwire: Tripwire | undefined;
  for await (const part of stream.fullStream as AsyncIterable<{ type: string; payload?: unknown }>) {
    if (part.type === 'tripwire') tripwire = part.payload as Tripwire;
  }
  return { text: await stream.text, tripwire, calls: calls() };
}

/** What registering the agent with a Mastra instance whose observability store has `store` does. */
const mastraWith = (store: unknown) =>
  ({
    getStorage: () => ({ stores: { observability: store } }),
    getLogger: () => ({ warn: () => undefined, debug: () => undefined }),
  }) as never;

describe('a cost guard with no Tollgate client, on an Agent never registered with a Mastra instance', () => {
  it.each(modes)(
    'lets the steps run and warns once, as the specification fails open when the cost cannot be read (%s)',
    async (mode) => {
      const warn = jest.fn();
      const guard = new CostGuardProcessor({ maxCost: 1, logger: { warn } });
      const first = await run(guard, mode);
      const second = await run(guard, mode);
      expect([first.text, first.tripwire, first.calls]).toEqual(['Hello there.', undefined, 1]);
      expect([second.text, second.tripwire, second.calls]).toEqual(['Hello there.', undefined, 1]);
      expect(warn.mock.calls).toEqual([
        [
          'Cost guard: CostGuardProcessor has no Tollgate client and was not registered with a Mastra instance, so it has no observability storage to read the cost from; the cost is not checked and steps run (fail-open). Pass `client`, or register the agent with a Mastra instance that has observability storage.',
        ],
      ]);
    },
  );

  it.each(modes)('blocks instead with failMode closed (%s)', async (mode) => {
    const { text, tripwire, calls } = await run(
      new TokenCostControl({ maxCost: 1, failMode: 'closed', logger: { warn: () => undefined } }),
      mode,
    );
    expect([text, calls]).toEqual(['', 0]);
    expect(tripwire).toEqual({
      reason:
        'Cost guard: TokenCostControl has no Tollgate client and was not registered with a Mastra instance, so it has no observability storage to read the cost from; blocking the step (fail-closed)',
      retry: false,
      metadata: {
        processorId: 'token-cost-control',
        usage: { estimatedCost: null, costUnit: null },
        maxCost: 1,
        scope: 'resource',
        scopeKey: 'resource:r1',
        threshold: 'hard',
      },
      processorId: 'token-cost-control',
    });
  });

  it('still errors at registration when the Mastra instance has no observability storage, as the specification says', () => {
    expect(() => new TokenCostControl({ maxCost: 1 }).__registerMastra({ getStorage: () => undefined })).toThrow(
      'TokenCostControl requires a Tollgate client or observability storage with getMetricAggregate support. Pass `client`, or configure observability storage on your Mastra instance.',
    );
  });
});

describe("TokenCostControl: @mastra/core's name, id and texts, so code written for it moves over by changing its import", () => {
  it('has Mastra’s id and name, and validates its options with Mastra’s messages', () => {
    const ours = new TokenCostControl({ maxCost: 1 });
    const mastra = new MastraTokenCostControl({ maxCost: 1 });
    expect([ours.id, ours.name]).toEqual([mastra.id, mastra.name]);
    expect([ours.id, ours.name]).toEqual(['token-cost-control', 'Token Cost Control']);
    for (const bad of [{ maxCost: 0 }, { maxCost: 1, warnAtPercent: 100 }] satisfies CostGuardOptions[]) {
      const message = (() => {
        try {
          new MastraTokenCostControl(bad);
        } catch (error) {
          return (error as Error).message;
        }
      })();
      expect(() => new TokenCostControl(bad)).toThrow(message!);
    }
  });

  it.each(modes)(
    'on the same observability store, blocks with the very TripWire Mastra’s own raises (%s)',
    async (mode) => {
      const store = { getMetricAggregate: async () => ({ estimatedCost: 1.25, costUnit: 'USD' }) };
      const options = { maxCost: 1, scope: 'resource' as const, window: '30d' as const };
      const mastra = new MastraTokenCostControl(options);
      mastra.__registerMastra(mastraWith(store));
      const ours = new TokenCostControl({ ...options, logger: { warn: () => undefined } });
      ours.__registerMastra(mastraWith(store));

      const theirs = await run(mastra, mode);
      const mine = await run(ours, mode);
      expect(theirs.tripwire).toEqual({
        reason: 'Cost control: estimated cost limit exceeded (1.25/1)',
        retry: false,
        metadata: {
          processorId: 'token-cost-control',
          usage: { estimatedCost: 1.25, costUnit: 'USD' },
          maxCost: 1,
          scope: 'resource',
          scopeKey: 'resource:r1',
          threshold: 'hard',
        },
        processorId: 'token-cost-control',
      });
      expect(mine).toEqual(theirs);
    },
  );

  it.each(modes)('with a Tollgate client, is exact and still speaks as Mastra’s does (%s)', async (mode) => {
    const tollgate = new InMemoryTollgate({ 'openai/gpt-4o': { inputPerMillion: 2, outputPerMillion: 10 } });
    tollgate.seed({ resourceId: 'r1' }, 'openai', 'gpt-4o', 500_000, 0); // $1.00 spent
    const { tripwire, calls } = await run(
      new TokenCostControl({ maxCost: 1, client: tollgate, logger: { warn: () => undefined } }),
      mode,
    );
    expect(calls).toBe(0);
    expect(tripwire?.processorId).toBe('token-cost-control');
    expect(tripwire?.reason).toMatch(/^Cost control: estimated cost limit exceeded \(1\.00\d+\/1\)$/);
    expect(tripwire?.metadata).toMatchObject({
      processorId: 'token-cost-control',
      scope: 'resource',
      scopeKey: 'resource:r1',
      threshold: 'hard',
      maxCost: 1,
    });
  });
});

describe("strategy 'warn' over the budget: one warning per request, as Mastra's TokenCostControl logs it", () => {
  const lookup = createTool({
    id: 'lookup',
    description: 'Looks something up',
    inputSchema: z.object({ q: z.string() }),
    execute: async () => ({ found: 'a result' }),
  });

  /** One run of a three-step agent (two tool calls, then the answer) with `guard` as its input processor. */
  async function threeSteps(guard: unknown, mode: (typeof modes)[number]) {
    const { model, calls } = scriptedModel([
      { toolCall: { toolName: 'lookup', input: { q: 'one' } } },
      { toolCall: { toolName: 'lookup', input: { q: 'two' } } },
      { text: ['All ', 'done.'] },
    ]);
    const agent = new Agent({
      id: 'warned',
      name: 'warned',
      instructions: 'Be brief.',
      model,
      tools: { lookup },
      inputProcessors: [guard as never],
    });
    const options = { requestContext: contextFor('r1'), maxSteps: 5, modelSettings: { maxOutputTokens: 100 } };
    const text =
      mode === 'generate'
        ? (await agent.generate('Look it up.', options)).text
        : await (
            await agent.stream('Look it up.', options)
          ).text;
    return { text, calls: calls() };
  }

  it.each(modes)(
    'with a Tollgate client: every step runs, one warning and one onViolation per request (%s)',
    async (mode) => {
      const tollgate = new InMemoryTollgate({ 'openai/gpt-4o': { inputPerMillion: 2, outputPerMillion: 10 } });
      tollgate.seed({ resourceId: 'r1' }, 'openai', 'gpt-4o', 600_000, 0); // $1.20 spent
      const warn = jest.fn();
      const guard = new CostGuardProcessor({ maxCost: 1, client: tollgate, strategy: 'warn', logger: { warn } });
      const violations: unknown[] = [];
      guard.onViolation = (v) => void violations.push(v);

      expect(await threeSteps(guard, mode)).toEqual({ text: 'All done.', calls: 3 });
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0]![0]).toMatch(/^Cost guard: cost limit exceeded \(1\.2\d*\/1\)$/);
      expect(violations).toHaveLength(1);

      await threeSteps(guard, mode); // a new request warns again, once
      expect(warn).toHaveBeenCalledTimes(2);
      expect(violations).toHaveLength(2);
    },
  );

  it.each(modes)(
    'on the same observability store as Mastra’s own, warns as many times as it does (%s)',
    async (mode) => {
      const store = { getMetricAggregate: async () => ({ estimatedCost: 1.25, costUnit: 'USD' }) };
      const options = { maxCost: 1, scope: 'resource' as const, strategy: 'warn' as const };
      const theirWarn = jest.fn();
      const mastra = new MastraTokenCostControl(options);
      mastra.__registerMastra({
        getStorage: () => ({ stores: { observability: store } }),
        getLogger: () => ({ warn: theirWarn, debug: () => undefined }),
      } as never);
      const ourWarn = jest.fn();
      const ours = new TokenCostControl({ ...options, logger: { warn: ourWarn } });
      ours.__registerMastra(mastraWith(store));

      expect(await threeSteps(mastra, mode)).toEqual({ text: 'All done.', calls: 3 });
      expect(await threeSteps(ours, mode)).toEqual({ text: 'All done.', calls: 3 });
      expect(theirWarn.mock.calls).toEqual([
        ['TokenCostControl: Cost control: estimated cost limit exceeded (1.25/1)'],
      ]);
      expect(ourWarn.mock.calls).toEqual([['Cost control: estimated cost limit exceeded (1.25/1)']]);
    },
  );
});
