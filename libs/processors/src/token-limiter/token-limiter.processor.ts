import type { AbortFn, MessageShape, StreamPartShape, SystemMessageShape } from '../mastra-shapes';
import { TokenCountCache } from '../token-count/count-cache';
import {
  MessageTokenCounter,
  TOKENS_PER_CONVERSATION,
  type CountLookup,
  type PromptMessageShape,
} from '../token-count/message-token-counter';
import { stepLimit } from './guard-budget';
import type {
  TokenLimiterInputArgs,
  TokenLimiterRequestArgs,
  TokenLimiterResultArgs,
  TokenLimiterStepArgs,
  TokenLimiterStreamArgs,
} from './mastra-args';
import type {
  TokenLimiterGuardOptions,
  TokenLimiterOptions,
  TokenLimiterTripwireMetadata,
  TokenLimitReachedPart,
} from './options';
import { isRunToolTraffic, promptToolCallIdsOf, runToolCallIds, toolCallIdsOf } from './run-tool-traffic';
import { selectMessages, type Candidate, type TrimMode } from './select-messages';
import { truncateByTokens } from './truncate-by-tokens';

const COUNTED_OUTPUT = new Set(['text-delta', 'object']);

/**
 * Limits tokens with exact BPE counts: trims what the model is sent before every LLM call of a run
 * (`processLLMRequest` on the provider prompt where Mastra calls it, else `processInputStep` on the
 * message list; `processInput` for standalone use), and caps the response (`processOutputStream`,
 * `processOutputResult`).
 *
 * Input trimming keeps system messages, this run's tool traffic, then the newest messages that
 * fit. When that leaves no conversation message, it aborts with a TripWire (`retry: false`)
 * rather than send an empty request.
 *
 * @example
 * ```ts
 * const agent = new Agent({ …, inputProcessors: [new TokenLimiterProcessor({ limit: 8000 })] });
 * ```
 */
export class TokenLimiterProcessor {
  /** Processor id, used by Mastra for state and tracing. */
  readonly id = 'token-limiter' as const;
  /** Display name. */
  readonly name = 'Token Limiter';
  private readonly maxTokens: number;
  private readonly strategy: 'truncate' | 'abort';
  private readonly countMode: 'cumulative' | 'part';
  private readonly trimMode: TrimMode;
  private readonly splitChunks: boolean;
  private readonly guard?: TokenLimiterGuardOptions;
  /** The counter, exposed so tests and benchmarks can observe how much encoding a run costs. */
  readonly counter: MessageTokenCounter;

  /** @param options - A token limit, or {@link TokenLimiterOptions}. */
  constructor(options: number | TokenLimiterOptions) {
    const o: TokenLimiterOptions = typeof options === 'number' ? { limit: options } : options;
    if (typeof o.limit !== 'number' || Number.isNaN(o.limit) || o.limit < 0)
      throw new RangeError('TokenLimiterProcessor limit must be a number ≥ 0');
    this.maxTokens = o.limit;
    this.splitChunks = o.splitChunks ?? false;
    this.strategy = o.strategy ?? 'truncate';
    this.countMode = o.countMode ?? 'cumulative';
    this.trimMode = o.trimMode ?? 'best-fit';
    this.guard = o.guard;
    this.counter = new MessageTokenCounter({
      encoding: o.encoding,
      cache: o.countCache === undefined ? new TokenCountCache() : o.countCache,
      imageTokens: o.imageTokens,
      fileTokens: o.fileTokens,
    });
  }

  /** The configured token limit. */
  getMaxTokens(): number {
    return this.maxTokens;
  }

  /**
   * Before the agentic loop: returns the messages that fit, system messages first in place.
   * Aborts with a TripWire when there are no messages, when system messages alone exceed the
   * limit, or when no message fits.
   *
   * Inside an agent (a `messageList` is given) the request is trimmed at step 0 instead, by
   * `processInputStep` or `processLLMRequest`, which see what the model is sent: trimming stored
   * messages here would count what a later processor (`ToolCallFilter`) removes from the prompt.
   */
  async processInput<M extends MessageShape>(args: TokenLimiterInputArgs<M>): Promise<M[]> {
    if (args.messageList) return args.messages;
    const systemMessages = args.systemMessages ?? [];
    const { kept } = this.trim(args.messages, systemMessages, NO_RUN_TOOL_CALLS, args.abort, this.maxTokens);
    return kept;
  }

  /**
   * Before every LLM call of a run: removes the messages that do not fit from the message list,
   * in place. With `guard`, the limit is the smaller of `limit` and Tollgate's remaining budget.
   *
   * When Mastra runs `processLLMRequest` for this processor (`llmRequestStage`), trimming happens
   * there, on the prompt the model receives, and stored messages are left alone.
   */
  async processInputStep<M extends MessageShape>(args: TokenLimiterStepArgs<M>): Promise<M[] | undefined> {
    // `processLLMRequest` trims at this step, and reads the run's tool traffic itself.
    if (args.llmRequestStage) return undefined;
    const list = args.messageList;
    const messages = list ? list.get.all.db() : args.messages;
    const runToolCalls = runToolCallIds(args.state, args.steps, list);
    const { limit, guardRemainingTokens } = await stepLimit(this.guard, this.maxTokens, args);
    const systemMessages = list?.getAllSystemMessages() ?? args.systemMessages ?? [];
    const { kept, dropped } = this.trim(
      messages,
      systemMessages,
      runToolCalls,
      args.abort,
      limit,
      guardRemainingTokens,
    );
    if (!list) return kept;
    if (dropped.length > 0) list.removeByIds(dropped.map((m) => m.id));
    return undefined;
  }

  /**
   * Directly before the model call (Mastra versions with `processLLMRequest`, such as 1.71): trims the provider prompt, after every
   * earlier processor rewrote it, so the limit applies to what the model is sent (a result that
   * `ToolCallFilter` removed costs nothing). System messages and this run's tool calls and
   * results are kept; a call and its results are kept or dropped together. Only this request
   * changes: stored messages and memory keep everything.
   */
  async processLLMRequest<P extends PromptMessageShape>(
    args: TokenLimiterRequestArgs<P>,
  ): Promise<{ prompt: P[] } | undefined> {
    const { prompt } = args;
    const runToolCalls = runToolCallIds(args.state, args.steps, args.messageList);
    const { limit, guardRemainingTokens } = await stepLimit(this.guard, this.maxTokens, args);
    const extra = guardRemainingTokens === undefined ? {} : { guardRemainingTokens };
    let systemTokens = 0;
    const conversation: P[] = [];
    for (const message of prompt) {
      if (message.role === 'system') systemTokens += this.counter.countPromptMessage(message);
      else conversation.push(message);
    }
    const candidates: Candidate[] = conversation.map((message) => {
      const ids = promptToolCallIdsOf(message);
      return {
        tokens: () => this.counter.countPromptMessage(message),
        minTokens: () => this.counter.minPromptTokens(message),
        toolCallIds: ids,
        protected: isRunToolTraffic(ids, runToolCalls),
      };
    });
    const keep = this.select(candidates, systemTokens, args.abort, limit, extra);
    if (keep.every(Boolean)) return undefined;
    let i = 0;
    return { prompt: prompt.filter((message) => message.role === 'system' || keep[i++]) };
  }

  /**
   * Counts `text-delta` and `object` parts against the limit; every other part (lifecycle,
   * reasoning, tool calls and results) passes uncounted, so tools always run. With `truncate`,
   * the part that crosses the limit and everything counted after it are withheld (with
   * `splitChunks`, the crossing `text-delta` is cut to what fits instead), and the first time a
   * transient `data-token-limit-reached` part is written. With `abort`, `abort()` is called.
   */
  async processOutputStream<P extends StreamPartShape>(args: TokenLimiterStreamArgs<P>): Promise<P | null> {
    const { part, state } = args;
    if (!COUNTED_OUTPUT.has(part.type)) return part;
    const cumulative = this.countMode === 'cumulative';
    if (cumulative && state.limitReached === true) return null;

    const text = part.type === 'text-delta' ? ((part.payload as { text?: string } | undefined)?.text ?? '') : undefined;
    const chunkTokens =
      text !== undefined ? this.counter.countText(text) : this.counter.countText(JSON.stringify(part.object) ?? '');
    const previous = cumulative && typeof state.tokens === 'number' ? state.tokens : 0;
    const total = previous + chunkTokens;
    if (total <= this.maxTokens) {
      if (cumulative) state.tokens = total;
      return part;
    }

    if (this.strategy === 'abort') {
      return args.abort(`Token limit of ${this.maxTokens} exceeded (current: ${total})`, {
        retry: false,
        metadata: { systemTokens: 0, limit: this.maxTokens, tokens: total },
      });
    }
    if (cumulative) state.limitReached = true;
    if (state.limitNotified !== true) {
      state.limitNotified = true;
      const notice: TokenLimitReachedPart = {
        type: 'data-token-limit-reached',
        data: { processorId: this.id, limit: this.maxTokens, tokens: total },
        transient: true,
      };
      // The notice is informational: a writer that fails must not break the stream it annotates.
      await args.writer?.custom(notice).catch(() => undefined);
    }
    if (text === undefined || !this.splitChunks) return null;
    const fit = truncateByTokens(this.counter, text, this.maxTokens - previous);
    if (cumulative) state.tokens = previous + fit.tokens;
    if (fit.text.length === 0) return null;
    return { ...part, payload: { ...(part.payload as object), text: fit.text } };
  }

  /**
   * Non-streaming result: cuts assistant text to the limit by tokens, counting across text parts,
   * never splitting a character or an emoji. With `abort`, calls `abort()` instead.
   */
  async processOutputResult<M extends MessageShape>(args: TokenLimiterResultArgs<M>): Promise<M[]> {
    let used = 0;
    return args.messages.map((message) => {
      const parts = message.content?.parts;
      if (message.role !== 'assistant' || !parts) return message;
      let changed = false;
      const nextParts = parts.map((part) => {
        if (part.type !== 'text' || typeof part.text !== 'string') return part;
        const tokens = this.counter.countText(part.text);
        if (used + tokens <= this.maxTokens) {
          used += tokens;
          return part;
        }
        if (this.strategy === 'abort') {
          args.abort(`Token limit of ${this.maxTokens} exceeded (current: ${used + tokens})`, {
            retry: false,
            metadata: { systemTokens: 0, limit: this.maxTokens, tokens: used + tokens },
          });
        }
        const fit = truncateByTokens(this.counter, part.text, this.maxTokens - used);
        used += fit.tokens;
        changed = true;
        return { ...part, text: fit.text };
      });
      return changed ? ({ ...message, content: { ...message.content, parts: nextParts } } as M) : message;
    });
  }

  private trim<M extends MessageShape>(
    messages: M[],
    systemMessages: SystemMessageShape[],
    runToolCalls: ReadonlySet<string>,
    abort: AbortFn<TokenLimiterTripwireMetadata>,
    limit: number,
    guardRemainingTokens?: number,
  ): { kept: M[]; dropped: M[] } {
    const extra = guardRemainingTokens === undefined ? {} : { guardRemainingTokens };
    let systemTokens = 0;
    for (const system of systemMessages) systemTokens += this.counter.countSystemMessage(system);
    const conversation: M[] = [];
    for (const message of messages) {
      if (message.role === 'system') systemTokens += this.counter.countMessage(message);
      else conversation.push(message);
    }
    const keep = this.select(
      conversation.map((message) => {
        // A cached count serves as both; otherwise the bound is a scan and the count an encoding.
        let known: CountLookup | undefined;
        const lookup = () => (known ??= this.counter.lookup(message));
        const toolCallIds = toolCallIdsOf(message);
        return {
          tokens: () => this.counter.countKnown(message, lookup()),
          minTokens: () => lookup().tokens ?? this.counter.minTokens(message),
          toolCallIds,
          protected: isRunToolTraffic(toolCallIds, runToolCalls),
        };
      }),
      systemTokens,
      abort,
      limit,
      extra,
    );
    const keepIds = new Set<M>();
    conversation.forEach((message, i) => keep[i] && keepIds.add(message));
    const kept: M[] = [];
    const dropped: M[] = [];
    for (const message of messages) (message.role === 'system' || keepIds.has(message) ? kept : dropped).push(message);
    return { kept, dropped };
  }

  /** Which conversation messages to keep, or a TripWire with the documented metadata. */
  private select(
    conversation: Candidate[],
    systemTokens: number,
    abort: AbortFn<TokenLimiterTripwireMetadata>,
    limit: number,
    extra: { guardRemainingTokens?: number },
  ): boolean[] {
    if (conversation.length === 0) {
      return abort('TokenLimiterProcessor: No messages to process. Cannot send LLM a request with no messages.', {
        retry: false,
        metadata: { systemTokens, limit, messageCount: 0, ...extra },
      });
    }
    if (systemTokens + TOKENS_PER_CONVERSATION >= limit) {
      return abort(
        'TokenLimiterProcessor: System messages alone exceed token limit. Requests cannot be completed by removing system messages.',
        { retry: false, metadata: { systemTokens, limit, ...extra } },
      );
    }
    const remainingBudget = limit - systemTokens - TOKENS_PER_CONVERSATION;
    const selection = selectMessages(conversation, remainingBudget, this.trimMode, {
      floor: this.counter.minMessageTokens,
    });
    if (!selection.ok) {
      const metadata = { systemTokens, limit, remainingBudget, messageCount: conversation.length, ...extra };
      if (selection.reason === 'protected-exceeds') {
        return abort(
          "TokenLimiterProcessor: This run's tool calls and results alone exceed the remaining token budget. Dropping them would make the agent repeat them.",
          { retry: false, metadata: { ...metadata, protectedTokens: selection.protectedTokens } },
        );
      }
      return abort(
        'TokenLimiterProcessor: No messages fit within the remaining token budget. Cannot send LLM a request with no messages.',
        {
          retry: false,
          metadata,
        },
      );
    }
    return selection.keep;
  }
}

/** `processInput` runs before any step: no message is this run's tool traffic yet. */
const NO_RUN_TOOL_CALLS: ReadonlySet<string> = new Set();
