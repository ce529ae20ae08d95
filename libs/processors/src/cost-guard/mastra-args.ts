import type {
  AbortFn,
  LoggerShape,
  MessageListShape,
  MessageShape,
  ModelShape,
  RequestContextShape,
  StepUsageShape,
  SystemMessageShape,
  TracingShape,
} from '../mastra-shapes';
import type { CostGuardTripwireMetadata } from './outcomes';

/** A Mastra instance, as far as registration needs it. */
export interface MastraShape {
  getStorage?(): { stores?: { observability?: unknown } } | undefined;
  getLogger?(): LoggerShape;
}

/** Arguments of `processInputStep` (a subset of Mastra's `ProcessInputStepArgs`). */
export interface CostGuardStepArgs<M = CostGuardTripwireMetadata> extends TracingShape {
  messages?: MessageShape[];
  messageList?: MessageListShape;
  systemMessages?: SystemMessageShape[];
  abort: AbortFn<M>;
  requestContext?: RequestContextShape;
  state: Record<string, unknown>;
  stepNumber: number;
  /** Completed steps; each one's usage and provider metadata (where AI SDK 5 Anthropic and Bedrock models put cache writes). */
  steps: ReadonlyArray<{ usage?: StepUsageShape; providerMetadata?: Readonly<Record<string, unknown>> }>;
  runId?: string;
  model?: ModelShape;
  modelSettings?: { maxOutputTokens?: number };
  agent?: { id?: string; name?: string };
}

/**
 * What `processInputStep` returns when it changed the step (Mastra's `ProcessInputStepResult`):
 * its model settings with the lower `maxOutputTokens`, and the model (the fallback, or the same
 * one) wrapped so that the step's result reports the change.
 */
export interface CostGuardStepResult {
  modelSettings?: { maxOutputTokens?: number };
  // Mastra's model union; typed loosely so the package type-checks without @mastra/core.
  model?: any;
}

/** Arguments of `processLLMResponse` (a subset of Mastra's `ProcessLLMResponseArgs`). */
export interface CostGuardResponseArgs {
  chunks: ReadonlyArray<{ type: string; payload?: unknown }>;
  stepNumber: number;
  state: Record<string, unknown>;
  fromCache?: boolean;
}

/** The `finish` chunk's payload, as far as recording reads it. */
export interface FinishPayload {
  /** `reason: 'tool-calls'` when the run goes on with another step. */
  stepResult?: { reason?: string };
  output?: { usage?: StepUsageShape };
  providerMetadata?: Readonly<Record<string, unknown>>;
  metadata?: { providerMetadata?: Readonly<Record<string, unknown>> };
}
