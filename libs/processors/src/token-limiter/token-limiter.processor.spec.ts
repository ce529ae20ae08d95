import { MessageList } from '@mastra/core/agent/message-list';
import { RequestContext } from '@mastra/core/request-context';
import { getEncoding } from 'js-tiktoken';
import { abort, caught, text, toolMessage, uid } from '../../test/support/messages';
import { InMemoryTollgate } from '../../test/support/in-memory-tollgate';
import type { MessageShape } from '../mastra-shapes';
import { TOKENS_PER_CONVERSATION, TOKENS_PER_MESSAGE } from '../token-count/message-token-counter';
import { TokenLimiterProcessor } from './token-limiter.processor';

const enc = getEncoding('o200k_base');
const exact = (s: string) => enc.encode(s, [], []).length;
const systemCost = (s: string) => TOKENS_PER_MESSAGE + exact('system') + exact(s);
const ids = (messages: Array<{ id: string }>) => messages.map((m) => m.id);

/** A user message of exactly `tokens` tokens, framing included ("user" is one token). */
function sized(tokens: number, id = uid()) {
  const body = Array.from({ length: tokens - TOKENS_PER_MESSAGE - 1 }, () => ' a').join('');
  const message = text('user', body, id);
  expect(TOKENS_PER_MESSAGE + exact('user') + exact(body)).toBe(tokens);
  return message;
}

const SYSTEM = 'You are terse.';

describe('TokenLimiterProcessor input', () => {
  it('exposes its id and limit, from a number or options', () => {
    expect(new TokenLimiterProcessor(500).id).toBe('token-limiter');
    expect(new TokenLimiterProcessor(500).getMaxTokens()).toBe(500);
    expect(new TokenLimiterProcessor({ limit: 700 }).getMaxTokens()).toBe(700);
    // As Mastra's: 0 is a limit (all output withheld); only what is not a number ≥ 0 is refused.
    expect(new TokenLimiterProcessor(0).getMaxTokens()).toBe(0);
    expect(() => new TokenLimiterProcessor(-1)).toThrow('TokenLimiterProcessor limit must be a number ≥ 0');
    expect(() => new TokenLimiterProcessor(Number.NaN)).toThrow('TokenLimiterProcessor limit must be a number ≥ 0');
  });

  // Budget for conversation = limit − system − conversation overhead. Messages: 10, 50, 10, 30 tokens.
  const limitFor = (budget: number) => budget + systemCost(SYSTEM) + TOKENS_PER_CONVERSATION;

  it('processInput keeps system messages, then the newest messages that fit (best-fit skips and keeps looking)', async () => {
    const history = [sized(10), sized(50), sized(10), sized(30)];
    const limiter = new TokenLimiterProcessor(limitFor(50));
    const kept = await limiter.processInput({
      messages: history,
      systemMessages: [{ role: 'system', content: SYSTEM }],
      abort,
    });
    expect(ids(kept)).toEqual(ids([history[0]!, history[2]!, history[3]!]));
  });

  it('processInput in contiguous mode keeps an unbroken suffix of the conversation', async () => {
    const history = [sized(10), sized(50), sized(10), sized(30)];
    const limiter = new TokenLimiterProcessor({ limit: limitFor(50), trimMode: 'contiguous' });
    const kept = await limiter.processInput({
      messages: history,
      systemMessages: [{ role: 'system', content: SYSTEM }],
      abort,
    });
    expect(ids(kept)).toEqual(ids(history.slice(2)));
  });

  it('keeps a system message stored among the conversation and counts it against the limit', async () => {
    const history = [text('system', SYSTEM), sized(10), sized(20)];
    const limiter = new TokenLimiterProcessor(limitFor(20));
    const kept = await limiter.processInput({ messages: history, abort });
    expect(ids(kept)).toEqual(ids([history[0]!, history[2]!]));
  });

  it('keeps a tool call and its result together when they are stored as separate messages', async () => {
    const call = toolMessage('call-1', 'lookup', { q: 'x' });
    const result = { ...toolMessage('call-1', 'lookup', { q: 'x' }, 'a long result '.repeat(20)) };
    const limiter = new TokenLimiterProcessor(1_000);
    const counter = limiter.counter;
    const question = sized(10);
    const budget = counter.countMessage(result) + counter.countMessage(question) + 5; // room for the result, not for its call
    const small = new TokenLimiterProcessor(limitFor(budget));
    const kept = await small.processInput({
      messages: [call, result, question],
      systemMessages: [{ role: 'system', content: SYSTEM }],
      abort,
    });
    expect(ids(kept)).toEqual(ids([question]));
  });

  it('processInputStep trims the message list in place at every step of a run', async () => {
    const limiter = new TokenLimiterProcessor(limitFor(60));
    const list = new MessageList();
    list.addSystem(SYSTEM);
    const history = [sized(20), sized(20), sized(20)];
    list.add(history as never, 'memory');
    for (let step = 0; step < 3; step++) {
      const next = sized(20);
      list.add(next as never, 'input');
      const result = await limiter.processInputStep({
        messages: list.get.all.db(),
        messageList: list as never,
        abort,
        stepNumber: step,
      });
      expect(result).toBeUndefined();
      expect(list.get.all.db()).toHaveLength(3);
      expect(list.get.all.db().at(-1)!.id).toBe(next.id);
    }
  });

  it("never drops this run's tool traffic: it aborts instead of sending a request that would loop", async () => {
    const list = new MessageList();
    list.addSystem(SYSTEM);
    const question = sized(10);
    list.add(question as never, 'input');
    // Mastra appends each step's tool invocations to the run's one assistant response message.
    list.add(toolMessage('t1', 'search', { q: 'first' }, 'r'.repeat(200)) as never, 'response');
    list.add(toolMessage('t2', 'search', { q: 'second' }, 'short') as never, 'response');
    const [, response] = list.get.all.db();
    expect(response!.content.parts.filter((p) => p.type === 'tool-invocation')).toHaveLength(2);
    const responseTokens = new TokenLimiterProcessor(1).counter.countMessage(response as MessageShape);
    // Room for the question but not for the run's tool results: plain best-fit would send the
    // question alone, and the model would call the same tools again.
    const budget = responseTokens - 1;
    const limiter = new TokenLimiterProcessor(limitFor(budget));
    const error = await caught(() =>
      limiter.processInputStep({ messages: [], messageList: list as never, abort, stepNumber: 2 }),
    );
    expect(error.message).toBe(
      "TokenLimiterProcessor: This run's tool calls and results alone exceed the remaining token budget. Dropping them would make the agent repeat them.",
    );
    expect(error.options).toEqual({
      retry: false,
      metadata: {
        systemTokens: systemCost(SYSTEM),
        limit: limitFor(budget),
        remainingBudget: budget,
        messageCount: 2,
        protectedTokens: responseTokens,
      },
    });

    // With room for the run's traffic, older messages make way for it.
    await new TokenLimiterProcessor(limitFor(responseTokens + 5)).processInputStep({
      messages: [],
      messageList: list as never,
      abort,
      stepNumber: 2,
    });
    expect(ids(list.get.all.db())).toEqual([response!.id]);
  });

  it("protects the run's tool traffic by its steps' tool call ids once it has left the response set", async () => {
    const list = new MessageList();
    list.addSystem(SYSTEM);
    list.add([sized(20), sized(20)] as never, 'memory');
    const question = sized(10);
    list.add(question as never, 'input');
    const tool = toolMessage('t9', 'search', { q: 'x' }, 'r'.repeat(120));
    list.add(tool as never, 'response');
    (list as unknown as { drainUnsavedMessages(): unknown }).drainUnsavedMessages(); // as the save queue does mid-run
    const toolTokens = new TokenLimiterProcessor(1).counter.countMessage(list.get.all.db().at(-1) as MessageShape);
    const limiter = new TokenLimiterProcessor(limitFor(toolTokens + 20));
    const steps = [
      {
        content: [
          { type: 'tool-call', toolCallId: 't9' },
          { type: 'tool-result', toolCallId: 't9' },
        ],
      },
    ];
    await limiter.processInputStep({
      messages: [],
      messageList: list as never,
      abort,
      stepNumber: 1,
      steps,
      state: {},
    });
    expect(ids(list.get.all.db())).toEqual([question.id, tool.id]);
  });

  describe("this run's tool traffic in its response set, on the message list (Mastra without processLLMRequest)", () => {
    /** A question, then the run's tool message (response set), then a newer, larger remembered message. */
    function competingRun(options: { drain?: boolean; persisted?: boolean } = {}) {
      const list = new MessageList();
      list.addSystem(SYSTEM);
      const at = <M extends object>(m: M, s: number) => ({ ...m, createdAt: new Date(Date.UTC(2025, 0, 1, 0, 0, s)) });
      const question = at(sized(10), 5);
      const tool = at(toolMessage('t-run', 'listRules', {}, 'rule '.repeat(60)), 10);
      const newer = at(sized(100), 20);
      list.add(question as never, 'input');
      list.add(tool as never, 'response');
      list.add(newer as never, 'memory');
      if (options.persisted === false) Object.defineProperty(list, 'getPersisted', { value: undefined }); // an older Mastra
      if (options.drain) list.drainUnsavedMessages();
      const toolTokens = new TokenLimiterProcessor(1).counter.countMessage(tool);
      // Room for any two of them, not for all three: plain newest-first trimming drops the tool message.
      expect(toolTokens + 10).toBeLessThan(100);
      return { list, question, tool, newer, limit: limitFor(100 + 10 + 5) };
    }
    const step = (limiter: TokenLimiterProcessor, list: MessageList) =>
      limiter.processInputStep({
        messages: [],
        messageList: list as never,
        abort,
        stepNumber: 0,
        steps: [],
        state: {},
      });

    it.each([
      ['best-fit', (r: ReturnType<typeof competingRun>) => [r.question, r.tool]],
      ['contiguous', (r: ReturnType<typeof competingRun>) => [r.tool]],
    ] as const)('keeps it with steps an empty array (%s)', async (trimMode, expected) => {
      const r = competingRun();
      await step(new TokenLimiterProcessor({ limit: r.limit, trimMode }), r.list);
      expect(ids(r.list.get.all.db())).toEqual(ids(expected(r)));
    });

    it('keeps it after the save queue drained the response set', async () => {
      const r = competingRun({ drain: true });
      expect(r.list.makeMessageSourceChecker().output.size).toBe(0);
      await step(new TokenLimiterProcessor(r.limit), r.list);
      expect(ids(r.list.get.all.db())).toEqual(ids([r.question, r.tool]));
    });

    it('keeps it from the live response set on a list without getPersisted', async () => {
      const r = competingRun({ persisted: false });
      await step(new TokenLimiterProcessor(r.limit), r.list);
      expect(ids(r.list.get.all.db())).toEqual(ids([r.question, r.tool]));
    });

    it('aborts, removing nothing, when the system messages and the tool traffic exceed the limit', async () => {
      const r = competingRun();
      const toolTokens = new TokenLimiterProcessor(1).counter.countMessage(r.tool);
      const error = await caught(() => step(new TokenLimiterProcessor(limitFor(toolTokens - 1)), r.list));
      expect(error.message).toBe(
        "TokenLimiterProcessor: This run's tool calls and results alone exceed the remaining token budget. Dropping them would make the agent repeat them.",
      );
      expect(error.options).toEqual({
        retry: false,
        metadata: {
          systemTokens: systemCost(SYSTEM),
          limit: limitFor(toolTokens - 1),
          remainingBudget: toolTokens - 1,
          messageCount: 3,
          protectedTokens: toolTokens,
        },
      });
      expect(ids(r.list.get.all.db())).toEqual(ids([r.question, r.tool, r.newer]));
    });
  });

  it('aborts with a TripWire when there are no messages', async () => {
    const error = await caught(() =>
      new TokenLimiterProcessor(100).processInput({
        messages: [],
        systemMessages: [{ role: 'system', content: SYSTEM }],
        abort,
      }),
    );
    expect(error.message).toBe(
      'TokenLimiterProcessor: No messages to process. Cannot send LLM a request with no messages.',
    );
    expect(error.options).toEqual({
      retry: false,
      metadata: { systemTokens: systemCost(SYSTEM), limit: 100, messageCount: 0 },
    });
  });

  it('aborts with a TripWire when system messages alone exceed the limit', async () => {
    const limit = systemCost(SYSTEM) + TOKENS_PER_CONVERSATION; // no room left for any message
    const error = await caught(() =>
      new TokenLimiterProcessor(limit).processInput({
        messages: [sized(5)],
        systemMessages: [{ role: 'system', content: SYSTEM }],
        abort,
      }),
    );
    expect(error.message).toBe(
      'TokenLimiterProcessor: System messages alone exceed token limit. Requests cannot be completed by removing system messages.',
    );
    expect(error.options).toEqual({ retry: false, metadata: { systemTokens: systemCost(SYSTEM), limit } });
  });

  it('aborts with a TripWire when no message fits', async () => {
    const error = await caught(() =>
      new TokenLimiterProcessor(limitFor(9)).processInput({
        messages: [sized(10), sized(12)],
        systemMessages: [{ role: 'system', content: SYSTEM }],
        abort,
      }),
    );
    expect(error.message).toBe(
      'TokenLimiterProcessor: No messages fit within the remaining token budget. Cannot send LLM a request with no messages.',
    );
    expect(error.options).toEqual({
      retry: false,
      metadata: { systemTokens: systemCost(SYSTEM), limit: limitFor(9), remainingBudget: 9, messageCount: 2 },
    });
  });

  it('with a guard, trims to the smaller of its limit and the token budget Tollgate has left', async () => {
    const tollgate = new InMemoryTollgate({ 'openai/gpt-4o': { inputPerMillion: 0, outputPerMillion: 0 } });
    const maxTotalTokens = 1_000;
    tollgate.seed({ resourceId: 'r1' }, 'openai', 'gpt-4o', maxTotalTokens - limitFor(40), 0); // leaves room for two 20-token messages
    const limiter = new TokenLimiterProcessor({
      limit: limitFor(100),
      guard: { client: tollgate, limits: [{ scope: 'resource', window: '24h', maxTotalTokens }] },
    });
    const list = new MessageList();
    list.addSystem(SYSTEM);
    const history = [sized(20), sized(20), sized(20)];
    list.add(history as never, 'memory');
    const requestContext = new RequestContext();
    requestContext.set('mastra__resourceId', 'r1');
    await limiter.processInputStep({ messages: [], messageList: list as never, abort, requestContext, stepNumber: 0 });
    expect(ids(list.get.all.db())).toEqual(ids(history.slice(1)));
    expect(tollgate.checks[0]).toEqual({
      context: { resourceId: 'r1', entityType: 'agent' },
      limits: [{ scope: 'resource', window: '24h', maxTotalTokens }],
      // A step of the limiter's own limit: every token budget it would reach comes back with what is left.
      estimate: { provider: 'unknown', model: 'unknown', inputTokens: limitFor(100), maxOutputTokens: 0 },
      dryRun: true,
      failMode: 'open',
    });

    // Another resource has its whole budget: the limiter's own limit applies.
    const other = new MessageList();
    other.addSystem(SYSTEM);
    other.add([sized(20), sized(20), sized(20)] as never, 'memory');
    requestContext.set('mastra__resourceId', 'r2');
    await limiter.processInputStep({ messages: [], messageList: other as never, abort, requestContext, stepNumber: 0 });
    expect(other.get.all.db()).toHaveLength(3);
  });

  it('with a guard that cannot be reached, trims to its own limit (open) or aborts (closed)', async () => {
    const tollgate = new InMemoryTollgate({});
    tollgate.failWith = new Error('connect ECONNREFUSED');
    const limits = [{ scope: 'resource' as const, maxTotalTokens: 10 }];
    const history = () => [sized(20), sized(20)];
    const open = new TokenLimiterProcessor({ limit: limitFor(100), guard: { client: tollgate, limits } });
    expect(
      await open.processInputStep({
        messages: history(),
        systemMessages: [{ role: 'system', content: SYSTEM }],
        abort,
      }),
    ).toHaveLength(2);
    const closed = new TokenLimiterProcessor({
      limit: limitFor(100),
      guard: { client: tollgate, limits, failMode: 'closed' },
    });
    const error = await caught(() => closed.processInputStep({ messages: history(), abort }));
    expect(error.message).toBe('TokenLimiterProcessor: Tollgate guard unavailable (connect ECONNREFUSED)');
    expect(error.options?.retry).toBe(false);
  });
});
