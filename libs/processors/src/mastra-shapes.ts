/**
 * The parts of `@mastra/core`'s processor contract these processors read, written as structural
 * types so the package loads without `@mastra/core` installed (it is an optional peer). Every
 * field is optional unless Mastra always provides it, and the processors accept Mastra's richer
 * types in their place (`test/mastra-compat.typecheck.ts` checks that under `tsc`).
 */

/** A message part as stored by Mastra (`MastraMessagePart`): only the fields the counter reads. */
export interface MessagePartShape {
  /** Part kind: `text`, `reasoning`, `tool-invocation`, `file`, `image`, `step-start`, `source`, `data-*`, … */
  type: string;
  /** Text of a `text` part. */
  text?: string;
  /** Text of a `reasoning` part. */
  reasoning?: string;
  /** Reasoning details, each possibly carrying text. */
  details?: ReadonlyArray<{ type?: string; text?: string }>;
  /** A tool call and, once it ran, its result. */
  toolInvocation?: {
    state: string;
    toolCallId: string;
    toolName?: string;
    args?: unknown;
    result?: unknown;
  };
  /** Media type of a `file` part. */
  mediaType?: string;
  /** Legacy media type of a `file` part. */
  mimeType?: string;
  /** Payload of a `file` part (base64, data URL, URL or bytes); never tokenized. */
  data?: unknown;
}

/** A stored message (`MastraDBMessage`): only the fields the processors read. */
export interface MessageShape {
  /** Stable message id; the token-count cache is keyed by it. */
  id: string;
  /** Author of the message. */
  role: string;
  /** Format-2 content. */
  content: {
    parts?: ReadonlyArray<MessagePartShape>;
    /** Legacy flat text, used only when there are no parts. */
    content?: string;
    /** Legacy attachments; estimated, never tokenized. */
    experimental_attachments?: ReadonlyArray<{ contentType?: string; url?: string }>;
  };
}

/** A system message as returned by `MessageList.getAllSystemMessages()` (an AI SDK v4 core message). */
export interface SystemMessageShape {
  role: string;
  content: unknown;
}

/** The `MessageList` methods the processors call. */
export interface MessageListShape<M extends MessageShape = MessageShape> {
  /** Message views; only `all.db()` is used. */
  get: { all: { db(): M[] } };
  /** Every system message, tagged or not. */
  getAllSystemMessages(): SystemMessageShape[];
  /** Removes messages in place; used at each step of a run. */
  removeByIds(ids: string[]): unknown;
  /** Which ids came from memory, this request's input, this run's response, or context. */
  makeMessageSourceChecker?(): { output: Set<string> };
  /** Every message added to this run's response set, including those the save queue drained from it. */
  readonly getPersisted?: { response?: { db(): M[] } };
}

/** Options accepted by `abort`; mirrors Mastra's `TripWireOptions`. */
export interface AbortOptions<TMetadata> {
  /** Whether the agent may retry with the reason as feedback. These processors always pass `false`. */
  retry?: boolean;
  /** Structured details for the caller. */
  metadata?: TMetadata;
}

/** Mastra's `abort`: throws a `TripWire`, never returns. */
export type AbortFn<TMetadata = unknown> = (reason?: string, options?: AbortOptions<TMetadata>) => never;

/** A request context (`RequestContext`): a string-keyed map. */
export interface RequestContextShape {
  get(key: string): unknown;
}

/** The tracing fields of Mastra's `ObservabilityContext` that carry the current trace id. */
export interface TracingShape {
  tracing?: { currentSpan?: { traceId?: string } };
  tracingContext?: { currentSpan?: { traceId?: string } };
}

/** The usage Mastra reports for one LLM step (`LanguageModelUsage`). */
export interface StepUsageShape {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  reasoningTokens?: number;
  cachedInputTokens?: number;
}

/** A model as Mastra passes it to `processInputStep`: resolved (`provider`, `modelId`) or a router id string. */
export type ModelShape = { provider?: string; modelId?: string } | string;

/** A stream part (`ChunkType`): only the fields the output limiter reads. */
export interface StreamPartShape {
  type: string;
  payload?: unknown;
  object?: unknown;
}

/** Mastra's stream writer for custom `data-*` parts. */
export interface StreamWriterShape {
  custom(data: { type: string; data?: unknown; transient?: boolean }): Promise<void>;
}

/** A logger with the methods the processors call (`IMastraLogger` satisfies it). */
export interface LoggerShape {
  warn(message: string, ...args: unknown[]): void;
}
