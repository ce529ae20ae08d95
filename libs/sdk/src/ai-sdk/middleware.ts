import type { GuardCheckResponse, GuardContext, GuardLimit } from '../../../contracts/src/guard';
import { fromAiSdk } from '../../../contracts/src/usage/normalize-usage';
import type { TollgateClient } from '../client';
import { TollgateError } from '../errors';
import type { RecordStepEvent } from '../events/prepare-event';

// Structural shapes of the AI SDK's language model (V2 in AI SDK 5, V3 in AI SDK 6): the SDK
// depends on neither `ai` nor `@ai-sdk/provider`, and the middleware fits both majors' types.

/** What the middleware reads of the wrapped model. */
export interface AiSdkModelLike {
  readonly specificationVersion?: string;
  /** The AI SDK's provider id, e.g. `openai.chat`, `anthropic.messages`. */
  readonly provider: string;
  readonly modelId: string;
}

/** What the middleware reads of a call's options (`LanguageModelV2CallOptions` / `LanguageModelV3CallOptions`). */
export interface AiSdkCallOptionsLike {
  prompt: unknown;
  maxOutputTokens?: number;
  tools?: unknown;
  providerOptions?: Record<string, Record<string, unknown>>;
  abortSignal?: AbortSignal;
}

/** One call of the wrapped model, as the middleware's callbacks receive it. */
export interface TollgateModelCall {
  type: 'generate' | 'stream';
  params: AiSdkCallOptionsLike;
  model: AiSdkModelLike;
}

type Awaitable<T> = T | PromiseLike<T>;

/** Settings of {@link tollgateMiddleware}. */
export interface TollgateMiddlewareOptions {
  client: TollgateClient;
  /**
   * The step's scope ids (runId, resourceId, threadId, userId, …), fixed or per call. A call can
   * also pass them as `providerOptions: { tollgate: { resourceId, runId, … } }`, which win. Without
   * a `runId`, each call is its own run (with `traceId` = `runId`).
   */
  context?: GuardContext | ((call: TollgateModelCall) => Awaitable<GuardContext>);
  /** Limits given with every check (the project's stored policies apply too). */
  limits?: Array<Omit<GuardLimit, 'window'> & { window?: GuardLimit['window'] }>;
  /** When Tollgate cannot answer: `open` lets the call run (default), `closed` denies it. */
  failMode?: 'open' | 'closed';
  /** Reserve the call's worst case while it runs (default true); its step event settles it. */
  reserve?: boolean;
  /**
   * `shrink`: a call whose worst case does not fit, but would with fewer output tokens, runs with
   * the guard's `adjust.maxOutputTokens` (set on the call; the reservation holds that many) instead
   * of being denied. Default: as the limits and policies say (`block` unless a policy shrinks and
   * `minOutputTokens` is given).
   */
  onExceed?: 'block' | 'shrink';
  /** The fewest output tokens a shrunk call may have (default 1); giving it lets a policy with `onExceed: 'shrink'` shrink the call. */
  minOutputTokens?: number;
  /**
   * The call's worst case. By default: its prompt and tools at ~4 characters per token (the
   * service multiplies input estimates by the margin it learns per model from recorded steps),
   * and `maxOutputTokens`. Give your tokenizer's count when you have one.
   */
  estimate?: (call: TollgateModelCall) => Awaitable<{ inputTokens: number; maxOutputTokens: number }>;
  /**
   * Output cap of a call that sets no `maxOutputTokens`: reserved, and set on the call, so that the
   * reservation bounds what the call can cost. Default 4096.
   */
  defaultMaxOutputTokens?: number;
  /** How the step is named (and priced) in Tollgate; default: the model's provider id before its first dot (`openai.chat` → `openai`). */
  provider?: string;
  /** Default: the model's `modelId`. */
  modelId?: string;
  /** Reported as `entityType` (default `agent`) and `entityName`, unless the context sets them. */
  entityType?: string;
  entityName?: string;
  environment?: string;
  serviceName?: string;
  tags?: string[];
  labels?: Record<string, string>;
  /** Every guard answer, allow and deny. */
  onDecision?: (decision: GuardCheckResponse, call: TollgateModelCall) => void;
  /** A step that could not be recorded or a reservation that could not be released; the call goes on. */
  onError?: (error: unknown) => void;
}

/**
 * Thrown instead of calling the model when Tollgate denies the step: a hard limit would be passed
 * (`violations` says which), the guard stayed busy past the SDK's deadline (`decision.reason`
 * `busy`), or it could not be reached with `failMode: 'closed'`. Nothing was reserved.
 */
export class TollgateGuardDeniedError extends TollgateError {
  /** The guard's answer. */
  readonly decision: GuardCheckResponse;

  constructor(decision: GuardCheckResponse) {
    const first = decision.violations[0];
    const why = first
      ? `${first.scopeKey}${first.window ? `@${first.window}` : ''} ${first.limitType} would reach ${first.usage} of ${first.limit} ${first.unit}`
      : decision.reason === 'busy'
        ? 'the guard stayed busy past the SDK deadline; the step was not run'
        : (decision.reason ?? 'denied');
    super(`Tollgate denied the model call: ${why}`, { code: 'guard_denied' });
    this.name = 'TollgateGuardDeniedError';
    this.decision = decision;
  }

  /** The limits that would be passed. */
  get violations(): GuardCheckResponse['violations'] {
    return this.decision.violations;
  }
}

/** True for a {@link TollgateGuardDeniedError}, also one made by another copy of the SDK (its ESM and CommonJS builds). */
export function isTollgateGuardDenied(error: unknown): error is TollgateGuardDeniedError {
  return (
    error instanceof TollgateGuardDeniedError ||
    ((error as { name?: unknown })?.name === 'TollgateGuardDeniedError' &&
      (error as { code?: unknown }).code === 'guard_denied')
  );
}

/** A middleware for `wrapLanguageModel`, in the shape of AI SDK 5 (`LanguageModelV2Middleware`) and AI SDK 6 (`LanguageModelV3Middleware`). */
export interface TollgateLanguageModelMiddleware {
  readonly specificationVersion: 'v3';
  readonly middlewareVersion: 'v2';
  transformParams: <P extends AiSdkCallOptionsLike>(options: {
    type: 'generate' | 'stream';
    params: P;
    model: AiSdkModelLike;
  }) => Promise<P>;
  wrapGenerate: <R>(options: {
    doGenerate: () => PromiseLike<R>;
    params: AiSdkCallOptionsLike;
    model: AiSdkModelLike;
  }) => Promise<R>;
  wrapStream: <R extends { stream: ReadableStream<unknown> }>(options: {
    doStream: () => PromiseLike<R>;
    params: AiSdkCallOptionsLike;
    model: AiSdkModelLike;
  }) => Promise<R>;
}

interface Step {
  call: TollgateModelCall;
  context: GuardContext & { runId: string; traceId: string; entityType: string };
  provider: string;
  model: string;
  reservationId?: string;
  /** The guard's `adjust.maxOutputTokens`: the call runs with this cap instead of its own. */
  shrunkTo?: number;
  startedAt: number;
  closed: boolean;
}

/** The wrapped model's calls, used only to send a shrunk call (the middleware's own `doGenerate` / `doStream` carry the original params). */
interface InnerModel<G, S = never> {
  doGenerate(params: AiSdkCallOptionsLike): PromiseLike<G>;
  doStream(params: AiSdkCallOptionsLike): PromiseLike<S>;
}

const CONTEXT_KEYS = [
  'traceId',
  'runId',
  'threadId',
  'resourceId',
  'userId',
  'organizationId',
  'sessionId',
  'entityType',
  'entityName',
] as const;

/** `providerOptions.tollgate`, the ids a single call can carry. */
function contextFromCall(params: AiSdkCallOptionsLike): GuardContext {
  const raw = params.providerOptions?.['tollgate'];
  const out: GuardContext = {};
  if (raw && typeof raw === 'object')
    for (const k of CONTEXT_KEYS) if (typeof raw[k] === 'string' && raw[k] !== '') out[k] = raw[k] as string;
  return out;
}

/** Characters of the prompt and tools as JSON, binary file data left out. */
function promptChars(params: AiSdkCallOptionsLike): number {
  const json = JSON.stringify([params.prompt ?? null, params.tools ?? null], (_k, v: unknown) =>
    ArrayBuffer.isView(v) || v instanceof ArrayBuffer ? undefined : v,
  );
  return json.length;
}

const finishReasonOf = (r: unknown): string | undefined => {
  const v = typeof r === 'string' ? r : (r as { unified?: unknown } | undefined)?.unified;
  return typeof v === 'string' && v !== '' ? v : undefined;
};

const TOKENS_MAX = 100_000_000;
const clampTokens = (n: number) => Math.max(0, Math.min(TOKENS_MAX, Math.ceil(n)));

/**
 * Tollgate's guard and ledger for any AI SDK model: before each `doGenerate` / `doStream`, the
 * step is checked against its budgets and its worst case reserved (a denial throws
 * {@link TollgateGuardDeniedError} and the model is not called); when the call finishes (or its
 * stream ends) the step is recorded with its real usage, normalized to Tollgate's meaning (input
 * includes cache reads and writes, output includes reasoning), and that event settles the
 * reservation; a call that fails, or a stream that errors or is cancelled before its `finish`
 * part, releases it.
 *
 * @example
 * ```ts
 * import { wrapLanguageModel, generateText } from 'ai';
 * import { tollgateMiddleware } from '@tollgate/sdk/ai-sdk';
 * const model = wrapLanguageModel({ model: openai('gpt-4o'), middleware: tollgateMiddleware({ client, limits: [{ scope: 'resource', window: '24h', maxCost: 5 }] }) });
 * await generateText({ model, prompt, providerOptions: { tollgate: { resourceId: 'customer-42' } } });
 * ```
 */
export function tollgateMiddleware(options: TollgateMiddlewareOptions): TollgateLanguageModelMiddleware {
  if (!options?.client)
    throw new TollgateError('tollgateMiddleware needs client, a TollgateClient', {
      code: 'validation_failed',
      field: 'client',
    });
  const defaultMax = options.defaultMaxOutputTokens ?? 4096;
  if (!Number.isInteger(defaultMax) || defaultMax < 1 || defaultMax > TOKENS_MAX) {
    throw new TollgateError(
      `tollgateMiddleware option defaultMaxOutputTokens must be an integer between 1 and ${TOKENS_MAX}, got ${String(defaultMax)}`,
      { code: 'validation_failed', field: 'defaultMaxOutputTokens' },
    );
  }
  const { client } = options;
  const reserve = options.reserve ?? true;
  const report = (err: unknown) => {
    try {
      options.onError?.(err);
    } catch {
      /* the caller's callback failed; the call goes on */
    }
  };

  async function begin(call: TollgateModelCall): Promise<Step> {
    const { params, model } = call;
    const given = typeof options.context === 'function' ? await options.context(call) : (options.context ?? {});
    const ctx: GuardContext = { ...given, ...contextFromCall(params) };
    const runId = ctx.runId ?? globalThis.crypto.randomUUID();
    const context = {
      ...ctx,
      runId,
      traceId: ctx.traceId ?? runId,
      entityType: ctx.entityType ?? options.entityType ?? 'agent',
      ...((ctx.entityName ?? options.entityName) ? { entityName: ctx.entityName ?? options.entityName } : {}),
    };
    const provider = options.provider ?? ((model.provider ?? '').split('.')[0] || 'unknown');
    const modelName = options.modelId ?? (model.modelId || 'unknown');
    const estimate = options.estimate
      ? await options.estimate(call)
      : { inputTokens: promptChars(params) / 4, maxOutputTokens: params.maxOutputTokens ?? defaultMax };
    const maxOutputTokens = clampTokens(estimate.maxOutputTokens);
    const decision = await client.guard.check({
      context,
      limits: options.limits as GuardLimit[] | undefined,
      estimate: { provider, model: modelName, inputTokens: clampTokens(estimate.inputTokens), maxOutputTokens },
      reserve,
      stepId: reserve ? `${runId}:${globalThis.crypto.randomUUID()}` : undefined,
      failMode: options.failMode ?? 'open',
      ...(options.onExceed ? { onExceed: options.onExceed } : {}),
      ...(options.minOutputTokens !== undefined && maxOutputTokens > 0
        ? { minOutputTokens: Math.max(1, Math.min(maxOutputTokens, Math.floor(options.minOutputTokens))) }
        : {}),
    });
    try {
      options.onDecision?.(decision, call);
    } catch (err) {
      report(err);
    }
    if (decision.decision === 'deny') throw new TollgateGuardDeniedError(decision);
    const shrunkTo = decision.adjust?.maxOutputTokens;
    return {
      call,
      context,
      provider,
      model: modelName,
      reservationId: decision.reservation?.id,
      ...(shrunkTo !== undefined ? { shrunkTo } : {}),
      startedAt: Date.now(),
      closed: false,
    };
  }

  /** The call ended without usage to record: free what it held. */
  async function release(step: Step): Promise<void> {
    if (step.closed) return;
    step.closed = true;
    if (!step.reservationId) return;
    try {
      await client.guard.release(step.reservationId);
    } catch (err) {
      report(err);
    }
  }

  /** Records the finished step; its event settles the reservation. */
  async function finish(step: Step, usage: unknown, finishReason: unknown, providerMetadata: unknown): Promise<void> {
    if (step.closed) return;
    const { model } = step.call;
    const spec =
      model.specificationVersion === 'v2' || model.specificationVersion === 'v3'
        ? model.specificationVersion
        : undefined;
    const normalized = fromAiSdk(usage as never, {
      provider: model.provider ?? step.provider,
      providerMetadata: providerMetadata as Record<string, unknown> | undefined,
      specVersion: spec,
    }).usage;
    const event: RecordStepEvent = {
      ...step.context,
      provider: step.provider,
      model: step.model,
      usage: normalized,
      durationMs: Math.max(0, Date.now() - step.startedAt),
      finishReason: finishReasonOf(finishReason),
      reservationId: step.reservationId,
      labels: options.labels,
      tags: options.tags,
      environment: options.environment,
      serviceName: options.serviceName,
    };
    for (const k of Object.keys(event) as (keyof RecordStepEvent)[]) if (event[k] === undefined) delete event[k];
    try {
      client.events.record(event);
      step.closed = true;
    } catch (err) {
      // Not recorded: the reservation would hold the worst case until it expires.
      report(err);
      await release(step);
    }
  }

  return {
    specificationVersion: 'v3',
    middlewareVersion: 'v2',

    // A call without an output cap gets the one its reservation is sized to.
    async transformParams({ params }) {
      if (params.maxOutputTokens !== undefined) return params;
      return { ...params, maxOutputTokens: defaultMax };
    },

    async wrapGenerate({ doGenerate, params, model }) {
      const step = await begin({ type: 'generate', params, model });
      // Shrunk by the guard: the inner model is called with the cap its reservation holds.
      const run =
        step.shrunkTo !== undefined
          ? () =>
              (model as unknown as InnerModel<Awaited<ReturnType<typeof doGenerate>>>).doGenerate({
                ...params,
                maxOutputTokens: step.shrunkTo,
              })
          : doGenerate;
      let result;
      try {
        result = await run();
      } catch (err) {
        await release(step);
        throw err;
      }
      const r = result as { usage?: unknown; finishReason?: unknown; providerMetadata?: unknown };
      await finish(step, r.usage, r.finishReason, r.providerMetadata);
      return result;
    },

    async wrapStream({ doStream, params, model }) {
      const step = await begin({ type: 'stream', params, model });
      const run =
        step.shrunkTo !== undefined
          ? () =>
              (model as unknown as InnerModel<never, Awaited<ReturnType<typeof doStream>>>).doStream({
                ...params,
                maxOutputTokens: step.shrunkTo,
              })
          : doStream;
      let result;
      try {
        result = await run();
      } catch (err) {
        await release(step);
        throw err;
      }
      const reader = result.stream.getReader();
      let finished: { usage?: unknown; finishReason?: unknown; providerMetadata?: unknown } | undefined;
      // The step ends with the stream: recorded when it carried a finish part, released otherwise.
      const end = () =>
        finished ? finish(step, finished.usage, finished.finishReason, finished.providerMetadata) : release(step);
      const stream = new ReadableStream<unknown>({
        async pull(controller) {
          let chunk: { done: boolean; value?: unknown };
          try {
            chunk = await reader.read();
          } catch (err) {
            await end();
            controller.error(err);
            return;
          }
          if (chunk.done) {
            await end();
            controller.close();
            return;
          }
          const part = chunk.value as { type?: unknown };
          if (part && part.type === 'finish') finished = part as typeof finished;
          controller.enqueue(chunk.value);
        },
        async cancel(reason) {
          await end();
          await reader.cancel(reason);
        },
      });
      return { ...result, stream } as typeof result;
    },
  };
}
