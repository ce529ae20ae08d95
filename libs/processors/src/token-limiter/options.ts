import type { TiktokenBPE } from 'js-tiktoken/lite';
import type { TokenCountCache } from '../token-count/count-cache';
import type { GuardContext, GuardLimit, TollgateGuardClient } from '../tollgate/guard-client';
import type { TrimMode } from './select-messages';

/** Ask Tollgate for the token budget left in the step's scopes, and trim to it when it is below `limit`. */
export interface TokenLimiterGuardOptions {
  /** A Tollgate client (the SDK, or anything with the same `guard.check`). */
  client: TollgateGuardClient;
  /**
   * Token limits whose remaining budget caps the request (`maxInputTokens` and/or `maxTotalTokens`
   * per scope). The project's stored policies apply as well, so this may be omitted when they
   * hold the budgets.
   */
  limits?: GuardLimit[];
  /** Ids to use instead of (or in addition to) those read from the request context. */
  context?: GuardContext;
  /** When Tollgate cannot be reached: `'open'` (default) trims to `limit` alone, `'closed'` aborts the step. */
  failMode?: 'open' | 'closed';
}

/** Options of {@link TokenLimiterProcessor}. */
export interface TokenLimiterOptions {
  /** Maximum tokens: of the request (input processor) or of the response (output processor). `0` withholds all output. */
  limit: number;
  /** BPE rank set from `js-tiktoken/ranks/*`. Default `o200k_base` (GPT-4o, GPT-5 family). */
  encoding?: TiktokenBPE;
  /** At the output limit: `'truncate'` (default) stops emitting text, `'abort'` calls `abort()`. */
  strategy?: 'truncate' | 'abort';
  /**
   * Streaming with `truncate`: cut the `text-delta` that crosses the limit to the tokens that still
   * fit (on a grapheme boundary) and emit that prefix. Default `false`: the crossing chunk is
   * withheld whole, as Mastra's processor does.
   */
  splitChunks?: boolean;
  /** Output counting: `'cumulative'` (default) from the start of the stream, `'part'` per part only. */
  countMode?: 'cumulative' | 'part';
  /** Input trimming: `'best-fit'` (default) keeps as many messages as fit, `'contiguous'` keeps an unbroken suffix. */
  trimMode?: TrimMode;
  /**
   * Token-count cache. Defaults to one per processor, which survives across steps and across runs
   * of the same thread (messages are keyed by id and content version). `false` disables it.
   */
  countCache?: TokenCountCache | false;
  /** Tokens counted per image. Default 765. */
  imageTokens?: number;
  /** Tokens counted per non-image file. Default 1,500. */
  fileTokens?: number;
  /** Also cap each step by the token budget Tollgate reports as remaining. */
  guard?: TokenLimiterGuardOptions;
}

/** Metadata of the TripWire raised when a request cannot be made to fit. */
export interface TokenLimiterTripwireMetadata {
  /** Tokens of the system messages, framing included. */
  systemTokens: number;
  /** The limit applied to this request (the smaller of `limit` and Tollgate's remaining budget). */
  limit: number;
  /** Tokens left for conversation messages after system messages and the conversation overhead. */
  remainingBudget?: number;
  /** Conversation messages considered. */
  messageCount?: number;
  /** Tokens of this run's tool calls and results, which are never dropped. */
  protectedTokens?: number;
  /** Token budget Tollgate reported as remaining, when it capped the limit. */
  guardRemainingTokens?: number;
  /** Output tokens counted when the output limit was exceeded (`abort` strategy). */
  tokens?: number;
}

/** The transient stream part emitted the first time output is withheld. */
export interface TokenLimitReachedPart {
  type: 'data-token-limit-reached';
  data: { processorId: 'token-limiter'; limit: number; tokens: number };
  transient: true;
}
