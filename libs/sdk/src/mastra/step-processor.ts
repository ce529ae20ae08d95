import type {
  ProcessAPIErrorArgs,
  ProcessInputStepArgs,
  ProcessOutputStepArgs,
  Processor,
} from '@mastra/core/processors';
import type { GuardCheckResponse, GuardLimit } from '../../../contracts/src/guard';
import { fromAiSdk } from '../../../contracts/src/usage/normalize-usage';
import type { TollgateClient } from '../client';
import { TollgateError } from '../errors';
import type { RecordStepEvent } from '../events/prepare-event';

/** RequestContext keys the processor reads, beside Mastra's own `mastra__resourceId` / `mastra__threadId`. */
export const TOLLGATE_CONTEXT_KEYS = {
  /** A reservation from a guard check made outside the agent; the step event settles it. */
  reservationId: 'tollgate__reservationId',
  /** The run id to report; otherwise Mastra's trace id, or one generated per request. */
  runId: 'tollgate__runId',
} as const;

/** Guard settings of {@link TollgateStepProcessor}. */
export interface TollgateStepGuardOptions {
  /** Limits given in the request (project policies stored in Tollgate apply too). */
  limits?: GuardLimit[] | Array<Omit<GuardLimit, 'window'> & { window?: GuardLimit['window'] }>;
  /** What to do when Tollgate cannot answer: `open` allows (default), `closed` denies. */
  failMode?: 'open' | 'closed';
  /** Reserve the step's estimate while it runs; its step event settles the reservation. */
  reserve?: boolean;
  /** Estimate of the step for the reservation; by default ~4 characters per input token and `modelSettings.maxOutputTokens` (or 1024). */
  estimate?: (args: ProcessInputStepArgs<TollgateTripwireMetadata>) => { inputTokens: number; maxOutputTokens: number };
  /** Called with every guard answer (allow and deny). */
  onDecision?: (decision: GuardCheckResponse) => void;
}

/** Settings of {@link TollgateStepProcessor}. */
export interface TollgateStepProcessorOptions {
  client: TollgateClient;
  /** The agent's name, reported as `entityName` (Mastra does not tell processors which agent runs them). */
  entityName?: string;
  /** Default `agent`. */
  entityType?: string;
  environment?: string;
  serviceName?: string;
  tags?: string[];
  labels?: Record<string, string>;
  /** Check budgets before each step, and deny it with a TripWire when a hard limit is reached. */
  guard?: TollgateStepGuardOptions;
  /** Called when a step could not be reported (an invalid event); the agent goes on. */
  onError?: (error: unknown) => void;
}

/** What the TripWire of a denied step carries as `metadata`. */
export interface TollgateTripwireMetadata {
  processorId: 'tollgate-step';
  decision: GuardCheckResponse;
}

interface StepState {
  runId?: string;
  provider?: string;
  model?: string;
  /** The model's provider id as the AI SDK gives it (`anthropic.messages`): it says what its usage means. */
  providerId?: string;
  specVersion?: 'v2' | 'v3';
  startedAt?: number;
  reservationId?: string;
}

interface ModelLike {
  provider?: string;
  modelId?: string;
  specificationVersion?: string;
}

const STATE_KEY = 'tollgateStep';

/** `openai.chat` → `openai`: the AI SDK suffixes provider ids with the API flavour. */
function providerOf(model: unknown): { provider: string; model: string } {
  if (typeof model === 'string') {
    const [provider, ...rest] = model.split('/');
    return rest.length ? { provider, model: rest.join('/') } : { provider: 'unknown', model };
  }
  const m = (model ?? {}) as ModelLike;
  return { provider: (m.provider ?? 'unknown').split('.')[0] || 'unknown', model: m.modelId ?? 'unknown' };
}

const ctxString = (ctx: { get(key: string): unknown } | undefined, key: string): string | undefined => {
  const v = ctx?.get(key);
  return typeof v === 'string' && v.length > 0 ? v : undefined;
};

/**
 * Reports every LLM step of a Mastra agent to Tollgate, with no code in the agent: add it as an
 * input and output processor (and as an error processor to release unused reservations).
 * With `guard`, it checks budgets before each step and aborts a step Tollgate denies with a
 * TripWire; with `guard.reserve`, the step's estimate is reserved and settled by its event.
 *
 * Scope ids come from the RequestContext keys Mastra uses: `mastra__resourceId`,
 * `mastra__threadId`, `userId`, `organizationId`, `sessionId`.
 *
 * @example
 * ```ts
 * const tollgateSteps = new TollgateStepProcessor({ client, entityName: 'support' });
 * new Agent({ …, inputProcessors: [tollgateSteps], outputProcessors: [tollgateSteps], errorProcessors: [tollgateSteps] });
 * ```
 */
export class TollgateStepProcessor implements Processor<'tollgate-step', TollgateTripwireMetadata> {
  readonly id = 'tollgate-step' as const;
  readonly name = 'Tollgate step usage';

  constructor(private readonly options: TollgateStepProcessorOptions) {}

  private state(args: { state: Record<string, unknown> }): StepState {
    return ((args.state[STATE_KEY] as StepState | undefined) ?? (args.state[STATE_KEY] = {})) as StepState;
  }

  private scope(
    args: ProcessInputStepArgs<TollgateTripwireMetadata> | ProcessOutputStepArgs<TollgateTripwireMetadata>,
    state: StepState,
  ) {
    const ctx = args.requestContext as { get(key: string): unknown } | undefined;
    const span = args.tracing?.currentSpan as { traceId?: string; id?: string } | undefined;
    state.runId ??=
      ctxString(ctx, TOLLGATE_CONTEXT_KEYS.runId) ??
      ('runId' in args ? args.runId : undefined) ??
      span?.traceId ??
      globalThis.crypto.randomUUID();
    return {
      traceId: span?.traceId ?? state.runId,
      spanId: span?.id,
      runId: state.runId,
      threadId: ctxString(ctx, 'mastra__threadId'),
      resourceId: ctxString(ctx, 'mastra__resourceId'),
      userId: ctxString(ctx, 'userId'),
      organizationId: ctxString(ctx, 'organizationId'),
      sessionId: ctxString(ctx, 'sessionId'),
    };
  }

  /** Remembers the step's model and start time; with `guard`, asks Tollgate whether it may run. */
  async processInputStep(args: ProcessInputStepArgs<TollgateTripwireMetadata>): Promise<void> {
    const state = this.state(args);
    const { provider, model } = providerOf(args.model);
    state.provider = provider;
    state.model = model;
    const m = (typeof args.model === 'string' ? {} : (args.model ?? {})) as ModelLike;
    state.providerId = m.provider ?? provider;
    state.specVersion =
      m.specificationVersion === 'v2' || m.specificationVersion === 'v3' ? m.specificationVersion : undefined;
    state.startedAt = Date.now();
    state.reservationId = undefined;
    const guard = this.options.guard;
    if (!guard) return;
    const scope = this.scope(args, state);
    const estimate = guard.estimate?.(args) ?? defaultEstimate(args);
    const decision = await this.options.client.guard.check({
      context: {
        traceId: scope.traceId,
        runId: scope.runId,
        threadId: scope.threadId,
        resourceId: scope.resourceId,
        userId: scope.userId,
        organizationId: scope.organizationId,
        sessionId: scope.sessionId,
        entityType: this.options.entityType ?? 'agent',
        entityName: this.options.entityName,
      },
      limits: guard.limits as GuardLimit[] | undefined,
      estimate: { provider, model, inputTokens: estimate.inputTokens, maxOutputTokens: estimate.maxOutputTokens },
      reserve: guard.reserve ?? false,
      stepId: guard.reserve ? `${scope.runId}:${args.stepNumber}:${args.retryCount ?? 0}` : undefined,
      failMode: guard.failMode ?? 'open',
    });
    guard.onDecision?.(decision);
    if (decision.decision === 'deny') {
      const first = decision.violations[0];
      const why = first
        ? `${first.scopeKey} ${first.limitType} ${first.usage}/${first.limit} ${first.unit}`
        : (decision.reason ?? 'denied');
      // Busy is load: the SDK already retried it until its deadline; no budget was checked.
      const message =
        decision.reason === 'busy'
          ? 'Tollgate guard was busy (retried until its deadline); the step was not run'
          : `Tollgate guard denied the step: ${why}`;
      args.abort(message, { retry: false, metadata: { processorId: 'tollgate-step', decision } });
    }
    state.reservationId = decision.reservation?.id;
  }

  /**
   * Records the step's usage as a step event (settling its reservation, when there is one), in
   * Tollgate's meaning whatever the provider and AI SDK major: an Anthropic or Bedrock step's cache
   * reads and writes are counted inside its input tokens, a Gemini step's thoughts inside its
   * output tokens (see `fromAiSdk` in the contracts).
   */
  async processOutputStep(args: ProcessOutputStepArgs<TollgateTripwireMetadata>) {
    const state = this.state(args);
    try {
      const scope = this.scope(args, state);
      // Providers disagree on what input tokens are (Anthropic's leave the cache out), and AI SDK 5
      // passes each one's meaning through: normalized, the usage is Tollgate's whatever the model.
      const { usage } = fromAiSdk(args.usage, {
        provider: state.providerId ?? state.provider ?? 'unknown',
        providerMetadata: args.providerMetadata,
        specVersion: state.specVersion,
      });
      const ctx = args.requestContext as { get(key: string): unknown } | undefined;
      const event: RecordStepEvent = {
        ...scope,
        entityType: this.options.entityType ?? 'agent',
        entityName: this.options.entityName,
        provider: state.provider ?? 'unknown',
        model: state.model ?? 'unknown',
        usage,
        durationMs: state.startedAt !== undefined ? Math.max(0, Date.now() - state.startedAt) : undefined,
        finishReason: args.finishReason || undefined,
        stepIndex: args.stepNumber,
        reservationId: state.reservationId ?? ctxString(ctx, TOLLGATE_CONTEXT_KEYS.reservationId),
        labels: this.options.labels,
        tags: this.options.tags,
        environment: this.options.environment,
        serviceName: this.options.serviceName,
      };
      for (const k of Object.keys(event) as (keyof RecordStepEvent)[]) if (event[k] === undefined) delete event[k];
      this.options.client.events.record(event);
      state.reservationId = undefined;
    } catch (err) {
      if (!(err instanceof TollgateError)) throw err;
      this.options.onError?.(err);
    }
    return args.messageList;
  }

  /** The model call failed: release the step's reservation instead of holding it until it expires. */
  async processAPIError(args: ProcessAPIErrorArgs<TollgateTripwireMetadata>): Promise<void> {
    const state = this.state(args);
    const reservationId = state.reservationId;
    state.reservationId = undefined;
    if (!reservationId) return;
    try {
      await this.options.client.guard.release(reservationId);
    } catch (err) {
      this.options.onError?.(err);
    }
  }
}

function defaultEstimate(args: ProcessInputStepArgs<TollgateTripwireMetadata>): {
  inputTokens: number;
  maxOutputTokens: number;
} {
  let chars = 0;
  for (const m of args.messages ?? []) chars += JSON.stringify(m.content ?? '').length;
  for (const m of args.systemMessages ?? []) chars += JSON.stringify(m.content ?? '').length;
  const maxOutputTokens = (args.modelSettings as { maxOutputTokens?: number } | undefined)?.maxOutputTokens ?? 1024;
  return {
    inputTokens: Math.min(100_000_000, Math.ceil(chars / 4)),
    maxOutputTokens: Math.min(100_000_000, maxOutputTokens),
  };
}
