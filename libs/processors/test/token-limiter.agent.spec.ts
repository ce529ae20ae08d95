import { Agent } from '@mastra/core/agent';
import { MockMemory } from '@mastra/core/memory';
import { TokenLimiterProcessor as MastraTokenLimiter, ToolCallFilter } from '@mastra/core/processors';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { TokenLimiterProcessor } from '../src';
import { scriptedModel } from './support/scripted-model';

/** Every text the model was sent in one prompt, in order. */
const textsOf = (prompt: Array<{ role: string; content: unknown }>) =>
  prompt.flatMap((m) =>
    typeof m.content === 'string'
      ? [m.content]
      : (m.content as Array<{ type: string; text?: string }>).flatMap((p) => (p.type === 'text' ? [p.text!] : [])),
  );

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

  it.each(['generate', 'stream'] as const)(
    'trims at every step of a multi-step tool run and the run still finishes (%s)',
    async (mode) => {
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
      const text =
        mode === 'generate'
          ? (await agent.generate(messages, { maxSteps: 5 })).text
          : await (
              await agent.stream(messages, { maxSteps: 5 })
            ).text;

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
    },
  );

  /** The text an agent with `limiter` as output processor answers, and the limit notices it streamed. */
  async function answer(limiter: unknown, mode: 'generate' | 'stream', chunks: string[]) {
    const { model } = scriptedModel([{ text: chunks }]);
    const agent = new Agent({
      id: 'short',
      name: 'short',
      instructions: 'x',
      model,
      outputProcessors: [limiter as TokenLimiterProcessor],
    });
    if (mode === 'generate') return { text: (await agent.generate('Count.')).text, notices: [] as unknown[] };
    const stream = await agent.stream('Count.');
    const notices: unknown[] = [];
    let text = '';
    for await (const part of stream.fullStream as AsyncIterable<{
      type: string;
      payload?: { text?: string };
      data?: unknown;
    }>) {
      if (part.type === 'text-delta') text += part.payload?.text ?? '';
      if (part.type === 'data-token-limit-reached') notices.push(part.data);
    }
    return { text, notices };
  }
  // One token per word. Streamed, these are four chunks; generated, the mock model answers them as one.
  const COUNT = [' one two', ' three four', ' five six', ' seven'];

  it('streaming with truncate withholds the chunk that crosses the limit and all after it, as Mastra does', async () => {
    const ours = await answer(new TokenLimiterProcessor(5), 'stream', COUNT);
    expect(ours).toEqual({
      text: ' one two three four',
      notices: [{ processorId: 'token-limiter', limit: 5, tokens: 6 }],
    });
    expect((await answer(new MastraTokenLimiter(5), 'stream', COUNT)).text).toBe(ours.text);
  });

  it('generating with truncate withholds an answer that crosses the limit in one chunk, as Mastra does', async () => {
    const ours = await answer(new TokenLimiterProcessor(3), 'generate', COUNT);
    expect(ours.text).toBe('');
    expect((await answer(new MastraTokenLimiter(3), 'generate', COUNT)).text).toBe('');
  });

  it.each(['generate', 'stream'] as const)(
    'with splitChunks, cuts the crossing chunk to what fits (%s)',
    async (mode) => {
      const ours = await answer(new TokenLimiterProcessor({ limit: 5, splitChunks: true }), mode, COUNT);
      expect(ours.text).toBe(' one two three four five');
      if (mode === 'stream') expect(ours.notices).toEqual([{ processorId: 'token-limiter', limit: 5, tokens: 6 }]);
    },
  );

  it.each(['generate', 'stream'] as const)(
    'accepts a limit of 0 and withholds every text part, as Mastra does (%s)',
    async (mode) => {
      const ours = await answer(new TokenLimiterProcessor(0), mode, COUNT);
      expect(ours.text).toBe('');
      if (mode === 'stream') expect(ours.notices).toEqual([{ processorId: 'token-limiter', limit: 0, tokens: 2 }]);
      expect((await answer(new MastraTokenLimiter(0), mode, COUNT)).text).toBe('');
    },
  );

  it('reports a request that cannot fit as a tripwire with the documented metadata', async () => {
    const { model, prompts } = scriptedModel([{ text: ['never'] }]);
    const instructions = 'A long system prompt. '.repeat(40);
    const agent = new Agent({
      id: 'tiny',
      name: 'tiny',
      instructions,
      model,
      inputProcessors: [new TokenLimiterProcessor(50)],
    });
    const result = await agent.generate('Hello');
    expect(prompts).toHaveLength(0);
    expect(result.tripwire).toEqual({
      reason:
        'TokenLimiterProcessor: System messages alone exceed token limit. Requests cannot be completed by removing system messages.',
      retry: false,
      metadata: { systemTokens: expect.any(Number), limit: 50 },
      processorId: 'token-limiter',
    });
  });

  describe("this run's tool traffic and what the model is sent", () => {
    const big = (label: string, words: number) => `${label}: ${' word'.repeat(words)}`;
    const toolResults = (prompt: Array<{ role: string; content: unknown }>) =>
      prompt
        .filter((m) => m.role === 'tool')
        .flatMap((m) => (m.content as Array<{ type: string; toolCallId?: string }>).map((p) => p.toolCallId));

    it.each(['generate', 'stream'] as const)(
      'contiguous mode keeps the tool result although a newer message does not fit (%s)',
      async (mode) => {
        const lookup = createTool({
          id: 'lookup',
          description: 'Looks up',
          inputSchema: z.object({ q: z.string() }),
          execute: async () => ({ found: big('result', 300) }),
        });
        const { model, prompts } = scriptedModel([
          { toolCall: { toolName: 'lookup', input: { q: 'x' } } },
          { text: ['Found it.'] },
        ]);
        // A processor that adds context at each step after the first, as memory processors do.
        const reminder = {
          id: 'reminder',
          async processInputStep({
            stepNumber,
            messageList,
          }: {
            stepNumber: number;
            messageList: { add(m: unknown, source: string): void };
          }) {
            if (stepNumber === 1) messageList.add({ role: 'user', content: big('Reminder', 2_000) }, 'input');
          },
        };
        const agent = new Agent({
          id: 'contiguous',
          name: 'contiguous',
          instructions: 'Be brief.',
          model,
          tools: { lookup },
          inputProcessors: [reminder as never, new TokenLimiterProcessor({ limit: 1_000, trimMode: 'contiguous' })],
        });
        const messages = [...history, { role: 'user' as const, content: 'Final question?' }];
        const text =
          mode === 'generate'
            ? (await agent.generate(messages, { maxSteps: 3 })).text
            : await (
                await agent.stream(messages, { maxSteps: 3 })
              ).text;
        expect(text).toBe('Found it.');
        expect(prompts).toHaveLength(2);
        // The reminder (2,000 tokens) does not fit and ends the suffix; the run's tool result is kept all the same.
        expect(textsOf(prompts[1]!).some((t) => t.startsWith('Reminder'))).toBe(false);
        expect(toolResults(prompts[1]!)).toEqual(['call-0']);
      },
    );

    it.each(['generate', 'stream'] as const)(
      "keeps the run's tool results after the save queue drained them to memory (%s)",
      async (mode) => {
        const lookup = createTool({
          id: 'lookup',
          description: 'Looks up',
          inputSchema: z.object({ q: z.string() }),
          execute: async () => ({ found: big('result', 150) }),
        });
        const { model, prompts } = scriptedModel([
          { toolCall: { toolName: 'lookup', input: { q: 'one' } } },
          { toolCall: { toolName: 'lookup', input: { q: 'two' } } },
          { text: ['All ', 'done.'] },
        ]);
        // Drains the run's messages before every step, as Mastra's save queue does when it flushes
        // them to memory mid-run: they leave the response set although they are still this run's.
        const responseSetSizes: number[] = [];
        const drain = {
          id: 'save-queue',
          async processInputStep({
            messageList,
          }: {
            messageList: { drainUnsavedMessages(): unknown[]; makeMessageSourceChecker(): { output: Set<string> } };
          }) {
            messageList.drainUnsavedMessages();
            responseSetSizes.push(messageList.makeMessageSourceChecker().output.size);
          },
        };
        const agent = new Agent({
          id: 'drained',
          name: 'drained',
          instructions: 'Be brief.',
          model,
          tools: { lookup },
          inputProcessors: [drain as never, new TokenLimiterProcessor({ limit: 600 })],
        });
        const messages = [...history, { role: 'user' as const, content: 'Final question?' }];
        const text =
          mode === 'generate'
            ? (await agent.generate(messages, { maxSteps: 5 })).text
            : await (
                await agent.stream(messages, { maxSteps: 5 })
              ).text;
        expect(text).toBe('All done.');
        expect(responseSetSizes).toEqual([0, 0, 0]);
        expect(toolResults(prompts[2]!)).toEqual(['call-0', 'call-1']);
        expect(textsOf(prompts[2]!)).toContain('Final question?');
      },
    );

    it.each(['generate', 'stream'] as const)(
      'after ToolCallFilter, limits the prompt the model is sent, not the stored tool results (%s)',
      async (mode) => {
        const memory = new MockMemory();
        const thread = { thread: `filtered-${mode}`, resource: 'r1' };
        // An earlier run on the thread: a tool result of ~12,500 tokens, then the answer.
        const fetchReport = createTool({
          id: 'fetchReport',
          description: 'Fetches',
          inputSchema: z.object({}),
          execute: async () => ({ report: big('report', 12_500) }),
        });
        const first = scriptedModel([
          { toolCall: { toolName: 'fetchReport', input: {} } },
          { text: ['The answer is 42.'] },
        ]);
        const earlier = new Agent({
          id: 'filtered',
          name: 'filtered',
          instructions: 'Be brief.',
          model: first.model,
          tools: { fetchReport },
          memory,
        });
        expect((await earlier.generate('What does the report say?', { maxSteps: 3, memory: thread })).text).toBe(
          'The answer is 42.',
        );

        const { model, prompts } = scriptedModel([{ text: ['Still 42.'] }]);
        const agent = new Agent({
          id: 'filtered',
          name: 'filtered',
          instructions: 'Be brief.',
          model,
          tools: { fetchReport },
          memory,
          inputProcessors: [new ToolCallFilter(), new TokenLimiterProcessor({ limit: 8_000 })],
        });
        const text =
          mode === 'generate'
            ? (await agent.generate('And again?', { memory: thread })).text
            : await (
                await agent.stream('And again?', { memory: thread })
              ).text;
        expect(text).toBe('Still 42.');
        // The filtered prompt fits: the earlier question and answer are sent, the report never was.
        expect(textsOf(prompts[0]!)).toEqual([
          'Be brief.',
          'What does the report say?',
          'The answer is 42.',
          'And again?',
        ]);
        expect(toolResults(prompts[0]!)).toEqual([]);
      },
    );
  });
});
