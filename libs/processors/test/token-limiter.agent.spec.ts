import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { TokenLimiterProcessor } from '../src';
import { scriptedModel } from './support/scripted-model';

/** Every text the model was sent in one prompt, in order. */
const textsOf = (prompt: Array<{ role: string; content: unknown }>) =>
  prompt.flatMap((m) => (typeof m.content === 'string' ? [m.content] : (m.content as Array<{ type: string; text?: string }>).flatMap((p) => (p.type === 'text' ? [p.text!] : []))));

describe('TokenLimiterProcessor in a Mastra Agent', () => {
  const history = Array.from({ length: 30 }, (_, i) => {
    const content = `History message ${i}: ${'some words about the topic '.repeat(8)}`;
    return i % 2 === 0 ? { role: 'user' as const, content } : { role: 'assistant' as const, content };
  });
  const lookup = createTool({
    id: 'lookup',
    description: 'Looks something up',
    inputSchema: z.object({ q: z.string() }),
    execute: async () => ({ found: 'a result that takes some room in the prompt '.repeat(12) }),
  });

  it.each(['generate', 'stream'] as const)('trims at every step of a multi-step tool run and the run still finishes (%s)', async (mode) => {
    const { model, prompts } = scriptedModel([
      { toolCall: { toolName: 'lookup', input: { q: 'one' } } },
      { toolCall: { toolName: 'lookup', input: { q: 'two' } } },
      { text: ['All ', 'done.'] },
    ]);
    const agent = new Agent({
      id: 'limited',
      name: 'limited',
      instructions: 'Be brief.',
      model,
      tools: { lookup },
      inputProcessors: [new TokenLimiterProcessor({ limit: 1_000 })],
    });
    const messages = [...history, { role: 'user' as const, content: 'Final question?' }];
    const text = mode === 'generate' ? (await agent.generate(messages, { maxSteps: 5 })).text : await (await agent.stream(messages, { maxSteps: 5 })).text;

    expect(text).toBe('All done.');
    expect(prompts).toHaveLength(3);
    const kept = prompts.map((p) => textsOf(p).filter((t) => t.startsWith('History message')).length);
    // Each step's tool result takes room, so each step keeps fewer history messages, never all 30.
    expect(kept[0]).toBeLessThan(30);
    expect(kept[1]).toBeLessThan(kept[0]!);
    expect(kept[2]).toBeLessThan(kept[1]!);
    for (const prompt of prompts) {
      expect(textsOf(prompt)).toContain('Final question?');
      expect(textsOf(prompt)).toContain('Be brief.');
    }
    // The last step still sees both tool results: this run's tool traffic is never trimmed.
    const toolResults = prompts[2]!.filter((m) => m.role === 'tool').flatMap((m) => m.content as unknown[]);
    expect(toolResults).toHaveLength(2);
  });

  it('truncates a streamed answer and emits the transient data-token-limit-reached part once', async () => {
    const { model } = scriptedModel([{ text: [' one two', ' three four', ' five six', ' seven'] }]);
    const agent = new Agent({ id: 'short', name: 'short', instructions: 'x', model, outputProcessors: [new TokenLimiterProcessor(5)] });
    const stream = await agent.stream('Count.');
    const notices: unknown[] = [];
    let text = '';
    for await (const part of stream.fullStream as AsyncIterable<{ type: string; payload?: { text?: string }; data?: unknown }>) {
      if (part.type === 'text-delta') text += part.payload?.text ?? '';
      if (part.type === 'data-token-limit-reached') notices.push(part.data);
    }
    expect(text).toBe(' one two three four five');
    expect(notices).toEqual([{ processorId: 'token-limiter', limit: 5, tokens: 6 }]);
  });

  it('truncates a generated answer to the limit', async () => {
    const { model } = scriptedModel([{ text: [' one two three four five six seven'] }]);
    const agent = new Agent({ id: 'short', name: 'short', instructions: 'x', model, outputProcessors: [new TokenLimiterProcessor(3)] });
    const result = await agent.generate('Count.');
    expect(result.text).toBe(' one two three');
  });

  it('reports a request that cannot fit as a tripwire with the documented metadata', async () => {
    const { model, prompts } = scriptedModel([{ text: ['never'] }]);
    const instructions = 'A long system prompt. '.repeat(40);
    const agent = new Agent({ id: 'tiny', name: 'tiny', instructions, model, inputProcessors: [new TokenLimiterProcessor(50)] });
    const result = await agent.generate('Hello');
    expect(prompts).toHaveLength(0);
    expect(result.tripwire).toEqual({
      reason: 'TokenLimiterProcessor: System messages alone exceed token limit. Requests cannot be completed by removing system messages.',
      retry: false,
      metadata: { systemTokens: expect.any(Number), limit: 50 },
      processorId: 'token-limiter',
    });
  });
});
