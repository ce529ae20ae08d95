import type {
  AbortFn,
  MessageListShape,
  MessageShape,
  ModelShape,
  RequestContextShape,
  StreamPartShape,
  StreamWriterShape,
  SystemMessageShape,
  TracingShape,
} from '../mastra-shapes';
import type { PromptMessageShape } from '../token-count/message-token-counter';
import type { TokenLimiterTripwireMetadata } from './options';
import type { RunStepShape } from './run-tool-traffic';

/** Arguments of `processInput` (a subset of Mastra's `ProcessInputArgs`). */
export interface TokenLimiterInputArgs<M extends MessageShape> extends TracingShape {
  messages: M[];
  abort: AbortFn<TokenLimiterTripwireMetadata>;
  systemMessages?: SystemMessageShape[];
  messageList?: MessageListShape<M>;
  requestContext?: RequestContextShape;
}

/** Arguments of `processInputStep` (a subset of Mastra's `ProcessInputStepArgs`). */
export interface TokenLimiterStepArgs<M extends MessageShape> extends TokenLimiterInputArgs<M> {
  stepNumber?: number;
  /** This run's finished steps; their tool calls are protected from trimming. */
  steps?: ReadonlyArray<RunStepShape>;
  /** Per-run state Mastra keeps for this processor across its hooks. */
  state?: Record<string, unknown>;
  /** Set when Mastra will also call `processLLMRequest` for this processor at this step. */
  llmRequestStage?: boolean;
  /** The step's model; names the estimate sent to the guard. */
  model?: ModelShape;
  agent?: { id?: string; name?: string };
}

export type { RunStepShape } from './run-tool-traffic';

/** Arguments of `processLLMRequest` (a subset of Mastra's `ProcessLLMRequestArgs`). */
export interface TokenLimiterRequestArgs<
  P extends PromptMessageShape = PromptMessageShape,
  M extends MessageShape = MessageShape,
> extends TracingShape {
  /** The provider prompt about to be sent, after every earlier processor rewrote it. */
  prompt: P[];
  abort: AbortFn<TokenLimiterTripwireMetadata>;
  messageList?: MessageListShape<M>;
  stepNumber?: number;
  steps?: ReadonlyArray<RunStepShape>;
  state?: Record<string, unknown>;
  requestContext?: RequestContextShape;
  model?: ModelShape;
  agent?: { id?: string; name?: string };
}

/** Arguments of `processOutputStream` (a subset of Mastra's `ProcessOutputStreamArgs`). */
export interface TokenLimiterStreamArgs<P extends StreamPartShape> {
  part: P;
  state: Record<string, unknown>;
  abort: AbortFn<TokenLimiterTripwireMetadata>;
  writer?: StreamWriterShape;
}

/** Arguments of `processOutputResult`. */
export interface TokenLimiterResultArgs<M extends MessageShape> {
  messages: M[];
  abort: AbortFn<TokenLimiterTripwireMetadata>;
}
