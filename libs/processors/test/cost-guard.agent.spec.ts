import { Agent } from '@mastra/core/agent';
import { RequestContext } from '@mastra/core/request-context';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { CostGuardProcessor, formatCost } from '../src';
import { InMemoryTollgate } from './support/in-memory-tollgate';
import { scriptedModel } from './support/scripted-model';

// $2 per million input tokens, $10 per million output tokens: each scripted tool step costs
// 5,000 × 0.000002 + 1,000 × 0.00001 = $0.02.
const PRICES = { 'openai/gpt-4o': { input: 0.000002, output: 0.00001 } };
const STEP_USAGE = { input: 5_000, output: 1_000 };
const MAX_COST = 0.04;

function setup() {
  const tollgate = new InMemoryTollgate(PRICES);
  const { model, prompts } = scriptedModel([
    { toolCall: { toolName: 'lookup', input: { q: 'one' } }, usage: STEP_USAGE },
    { toolCall: { toolName: 'lookup', input: { q: 'two' } }, usage: STEP_USAGE },
    { text: ['never ', 'reached'], usage: STEP_USAGE },
  ]);
  const costGuard = new CostGuardProcessor({ maxCost: MAX_COST, client: tollgate, logger: { warn: () => undefined } });
  const violations: unknown[] = [];
  costGuard.onViolation = (v) => void violations.push(v);
  const lookup = createTool({ id: 'lookup', description: 'Looks something up', inputSchema: z.object({ q: z.string() }), execute: async () => ({ found: 'yes' }) });
  const agent = new Agent({ id: 'guarded', name: 'guarded', instructions: 'Use the lookup tool.', model, tools: { lookup }, inputProcessors: [costGuard] });
  const requestContext = new RequestContext();
  requestContext.set('mastra__resourceId', 'r1');
  return { tollgate, prompts, agent, requestContext, violations };
}

/** What the third step's check compared with the limit: two steps spent plus its own estimate. */
function expectedTripwire(tollgate: InMemoryTollgate) {
  const third = tollgate.checks[2]!.estimate!;
  const usage = 2 * tollgate.price('openai', 'gpt-4o', STEP_USAGE.input, STEP_USAGE.output) + tollgate.price('openai', 'gpt-4o', third.inputTokens, third.maxOutputTokens);
  return {
    reason: `Cost guard: cost limit exceeded (${formatCost(usage)}/${MAX_COST})`,
    retry: false,
    metadata: { processorId: 'cost-guard', usage: { estimatedCost: expect.closeTo(usage, 12), costUnit: 'USD' }, maxCost: MAX_COST, scope: 'resource', scopeKey: 'resource:r1', threshold: 'hard' },
  };
}

describe('CostGuardProcessor in a Mastra Agent', () => {
  it('blocks the third step of a run whose first two steps spent the budget (generate)', async () => {
    const { tollgate, prompts, agent, requestContext, violations } = setup();
    const result = await agent.generate('Look it up twice.', { maxSteps: 5, requestContext, modelSettings: { maxOutputTokens: 100 } });

    expect(prompts).toHaveLength(2); // the third LLM call never happened
    // Mastra 1.71 resolves generate() with the TripWire's data rather than rejecting.
    expect(result.tripwire).toEqual({ ...expectedTripwire(tollgate), processorId: 'cost-guard' });
    // Both steps were recorded against their reservations; nothing is left held.
    expect(tollgate.recorded.map((r) => [r.event.stepIndex, r.event.usage, r.event.reservationId !== undefined])).toEqual([
      [0, { inputTokens: 5_000, outputTokens: 1_000 }, true],
      [1, { inputTokens: 5_000, outputTokens: 1_000 }, true],
    ]);
    expect(tollgate.reservations.size).toBe(0);
    expect(tollgate.spent('resource', 'r1')).toBeCloseTo(MAX_COST, 12);
    expect(tollgate.checks.map((c) => c.estimate!.maxOutputTokens)).toEqual([100, 100, 100]);
    expect(violations).toHaveLength(1); // not a second time from Mastra's runner
  });

  it('blocks the third step when streaming, and the stream carries the tripwire part', async () => {
    const { tollgate, prompts, agent, requestContext } = setup();
    const stream = await agent.stream('Look it up twice.', { maxSteps: 5, requestContext, modelSettings: { maxOutputTokens: 100 } });
    const tripwires: unknown[] = [];
    for await (const part of stream.fullStream as AsyncIterable<{ type: string; payload?: unknown }>) {
      if (part.type === 'tripwire') tripwires.push(part.payload);
    }
    expect(prompts).toHaveLength(2);
    const { reason, retry, metadata } = expectedTripwire(tollgate);
    expect(tripwires).toEqual([{ reason, retry, metadata, processorId: 'cost-guard' }]);
  });
});
