import { Agent } from '@mastra/core/agent';
import { TOKENS_PER_CONVERSATION, TokenLimiterProcessor } from '../src';
import { text, toolMessage } from './support/messages';
import { scriptedModel } from './support/scripted-model';

/**
 * This run's tool traffic in its response set, through a real Agent: Mastra's own
 * TokenLimiterProcessor tests ("current run tool traffic") ported to ours. A processor in front of
 * the limiter puts the run's tool call and result in the response set at step 0, as those tests
 * do, so `steps` (an empty array there) does not name them: only the response set says they are
 * this run's. A newer, larger remembered message competes with them for the budget.
 */
type Prompt = Array<{ role: string; content: unknown }>;
type Tripwire = { reason: string; retry?: boolean; metadata?: Record<string, number>; processorId?: string };
const modes = ['generate', 'stream'] as const;

const QUESTION = 'How many rules do I have?';
const RULES = Array.from({ length: 60 }, (_, i) => `Rule number ${i} for the living room`);
const COMPETING = 'y '.repeat(900);
const LIMIT = 1_400;

/** Each prompt message as `role` or `role:what` (text, or the tool call id of a tool part). */
const shape = (prompt: Prompt) =>
  prompt.map((m) => {
    if (typeof m.content === 'string') return m.role;
    const parts = m.content as Array<{ type: string; text?: string; toolCallId?: string }>;
    const what = parts.map((p) => (p.type === 'text' ? p.text!.slice(0, 30) : `${p.type}:${p.toolCallId}`));
    return `${m.role}:${what.join('+')}`;
  });

const SYSTEM = 'system';
const ASKED = `user:${QUESTION}`;
const CALL = 'assistant:tool-call:call-response-tool';
const RESULT = 'tool:tool-result:call-response-tool';
const COMPETITOR = `user:${COMPETING.slice(0, 30)}`;

/**
 * An input processor that, at step 0, adds this run's tool call and its result to the response set
 * (one message, as Mastra stores them) and, with `competing`, a newer and larger remembered message;
 * with `drain`, it then drains the unsaved messages as Mastra's save queue does mid-run.
 */
function runTraffic(options: { competing: boolean; drain?: boolean }) {
  const outputSizes: number[] = [];
  const processor = {
    id: 'run-traffic',
    async processInputStep({ stepNumber, messageList }: { stepNumber: number; messageList: ListView }) {
      if (stepNumber !== 0) return;
      const now = Date.now();
      const tool = toolMessage('call-response-tool', 'listRules', {}, { rules: RULES }, 'response-tool');
      messageList.add({ ...tool, createdAt: new Date(now + 1_000) }, 'response');
      if (options.competing)
        messageList.add({ ...text('user', COMPETING, 'competing-1'), createdAt: new Date(now + 2_000) }, 'memory');
      if (!options.drain) return;
      messageList.drainUnsavedMessages();
      outputSizes.push(messageList.makeMessageSourceChecker().output.size);
    },
  };
  return { processor, outputSizes };
}
interface ListView {
  add(message: unknown, source: string): void;
  drainUnsavedMessages(): unknown[];
  makeMessageSourceChecker(): { output: Set<string> };
}

/** One run of an agent with `runTraffic` in front of the limiter: the prompts its model was sent, and its tripwire. */
async function run(
  mode: (typeof modes)[number],
  limiter: TokenLimiterProcessor,
  traffic: ReturnType<typeof runTraffic>,
  instructions = 'Be brief.',
) {
  const { model, prompts } = scriptedModel([{ text: ['Done.'] }]);
  const agent = new Agent({
    id: 'run-traffic',
    name: 'run-traffic',
    instructions,
    model,
    inputProcessors: [traffic.processor as never, limiter],
  });
  let tripwire: Tripwire | undefined;
  if (mode === 'generate') {
    tripwire = (await agent.generate(QUESTION)).tripwire as Tripwire | undefined;
  } else {
    const stream = await agent.stream(QUESTION);
    for await (const part of stream.fullStream as AsyncIterable<{ type: string; payload?: unknown }>) {
      if (part.type === 'tripwire') tripwire = part.payload as Tripwire;
    }
  }
  return { prompts: prompts as Prompt[], tripwire };
}

describe("TokenLimiterProcessor in a Mastra Agent: this run's tool traffic in its response set", () => {
  it.each(modes)(
    'premise: the tool traffic, the question and the newer message do not all fit, any two do (%s)',
    async (mode) => {
      const { prompts } = await run(mode, new TokenLimiterProcessor(100_000), runTraffic({ competing: true }));
      const [system, question, call, result, competing] = prompts[0]!;
      expect(shape(prompts[0]!)).toEqual([SYSTEM, ASKED, CALL, RESULT, COMPETITOR]);
      const count = (m: unknown) => new TokenLimiterProcessor(1).counter.countPromptMessage(m as never);
      const budget = LIMIT - count(system) - TOKENS_PER_CONVERSATION;
      const [asked, tool, newer] = [count(question), count(call) + count(result), count(competing)];
      expect(asked + newer).toBeLessThanOrEqual(budget);
      expect(asked + tool).toBeLessThanOrEqual(budget);
      expect(newer).toBeGreaterThan(tool);
      expect(asked + tool + newer).toBeGreaterThan(budget);
    },
  );

  // Exact prompts: a regression that protects everything (or stops trimming) would keep the newer message too.
  it.each(modes)(
    "best-fit keeps the run's tool call and result, and the question, when a newer message competes (%s)",
    async (mode) => {
      const limiter = new TokenLimiterProcessor({ limit: LIMIT, trimMode: 'best-fit' });
      const { prompts, tripwire } = await run(mode, limiter, runTraffic({ competing: true }));
      expect(tripwire).toBeUndefined();
      expect(prompts.map(shape)).toEqual([[SYSTEM, ASKED, CALL, RESULT]]);
    },
  );

  it.each(modes)(
    "contiguous stops at the newer message that does not fit and still keeps the run's tool traffic (%s)",
    async (mode) => {
      const limiter = new TokenLimiterProcessor({ limit: LIMIT, trimMode: 'contiguous' });
      const { prompts, tripwire } = await run(mode, limiter, runTraffic({ competing: true }));
      expect(tripwire).toBeUndefined();
      expect(prompts.map(shape)).toEqual([[SYSTEM, CALL, RESULT]]);
    },
  );

  it.each(modes)("keeps the run's tool traffic after the save queue drained the response set (%s)", async (mode) => {
    const traffic = runTraffic({ competing: true, drain: true });
    const { prompts, tripwire } = await run(mode, new TokenLimiterProcessor(LIMIT), traffic);
    // The live response set is empty: only the run's persisted response set still names the tool message.
    expect(traffic.outputSizes).toEqual([0]);
    expect(tripwire).toBeUndefined();
    expect(prompts.map(shape)).toEqual([[SYSTEM, ASKED, CALL, RESULT]]);
  });

  it.each(modes)(
    "aborts with a non-retryable TripWire when the system prompt and the run's tool traffic exceed the limit (%s)",
    async (mode) => {
      // Same traffic, same limit: it fits with a short system prompt…
      const fits = await run(mode, new TokenLimiterProcessor(LIMIT), runTraffic({ competing: false }));
      expect(fits.tripwire).toBeUndefined();
      expect(fits.prompts.map(shape)).toEqual([[SYSTEM, ASKED, CALL, RESULT]]);

      // …and not once a large one has taken the budget first: the model is never called.
      const large = await run(
        mode,
        new TokenLimiterProcessor(LIMIT),
        runTraffic({ competing: false }),
        's '.repeat(900),
      );
      expect(large.prompts).toHaveLength(0);
      expect(large.tripwire).toEqual({
        reason:
          "TokenLimiterProcessor: This run's tool calls and results alone exceed the remaining token budget. Dropping them would make the agent repeat them.",
        retry: false,
        metadata: {
          systemTokens: expect.any(Number),
          limit: LIMIT,
          remainingBudget: expect.any(Number),
          messageCount: 3,
          protectedTokens: expect.any(Number),
        },
        processorId: 'token-limiter',
      });
      const { systemTokens, remainingBudget, protectedTokens } = large.tripwire!.metadata!;
      expect(systemTokens).toBeGreaterThan(800);
      expect(remainingBudget).toBe(LIMIT - systemTokens! - TOKENS_PER_CONVERSATION);
      expect(protectedTokens).toBeGreaterThan(remainingBudget!);
    },
  );
});
