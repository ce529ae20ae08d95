import { randomUUID } from 'node:crypto';
import type { TiktokenBPE } from 'js-tiktoken/lite';
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
import { TokenCountCache } from '../token-count/count-cache';
import { MessageTokenCounter, TOKENS_PER_CONVERSATION } from '../token-count/message-token-counter';
import { modelIds, readContextIds, scopeId } from '../tollgate/context-ids';
import { fromAiSdk } from '../../../contracts/src/usage/normalize-usage';
import { checkUntilServed, isBusy } from '../tollgate/busy-retry';
import type {
  GuardAdjust,
  GuardCheckRequest,
  GuardCheckResponse,
  GuardContext,
  GuardFinding,
  GuardScope,
  GuardWindow,
  StepUsageEvent,
  TollgateGuardClient,
} from '../tollgate/guard-client';
import { formatCost, formatViolationMessage } from './violation-message';
import { ObservabilityCostSource, type ObservabilityStoreShape } from './observability-cost-source';
import { reportingModel, type CostGuardStepReport } from './step-report';
import { aheadOf, CHECK_AHEAD_HOLD_MS, CHECK_AHEAD_TOKENS, covers, fitsPlainly, type CheckAhead } from './check-ahead';

/** Scopes a cost limit can apply to. `user`, `organization` and `session` read plain request-context keys. */
export type CostScope = GuardScope;
/** Aggregation windows (ignored for `run`). */
export type CostWindow = GuardWindow;

/** Options of {@link CostGuardProcessor}. */
export interface CostGuardOptions {
  /**
   * Maximum cost in the cost unit (USD), or a function of the request context for per-request
   * budgets. A function that throws or returns anything but a finite positive number skips the
   * check for that request (with a warning).
   */
  maxCost: number | ((requestContext?: RequestContextShape) => number);
  /** What the cost is summed over. Default `'resource'`. */
  scope?: CostScope;
  /** Aggregation window for every scope but `run`. Default `'7d'`. */
  window?: CostWindow;
  /**
   * Over the limit: `'block'` (default) aborts the step with a TripWire, `'warn'` lets it run and
   * warns once per request (logged and passed to `onViolation`), however many steps are over.
   */
  strategy?: 'block' | 'warn';
  /** Abort reason and warning text. Placeholders `{usage}` and `{limit}`. */
  message?: string;
  /** Soft threshold in percent of `maxCost` (exclusive 0–100): warns once per request, never aborts. */
  warnAtPercent?: number;
  /** Seed-compatible mode only: attach a per-provider/model cost breakdown to violations. */
  includeBreakdown?: boolean;
  /**
   * When the cost cannot be checked (Tollgate or the observability store unreachable): `'open'`
   * (default) lets the step run, `'closed'` aborts it. A step without the scope's id is always
   * let through, as the scope table of the specification says.
   */
  failMode?: 'open' | 'closed';
  /**
   * How long a step waits for Tollgate's guard when it answers busy (too many checks queued on
   * one of the step's scopes; nothing reserved), in ms from the step's first check. Default
   * 10 000. The check is sent again, with the same `stepId`, after the answer's `retryAfterMs`
   * plus jitter; once the next retry would start past this deadline, the busy answer is a deny
   * (a TripWire with `reason: 'busy'` under `block`, a warning under `warn`) whatever `failMode`
   * says: a busy guard is up and shedding load, not unreachable. With the SDK as `client`, the
   * SDK retries within what is left of this deadline. 0: no retry.
   */
  busyDeadlineMs?: number;
  /**
   * Tollgate client. With it the guard is exact: each step reserves its worst-case cost before
   * the LLM call and records its actual usage after. Without it, the processor must be registered
   * with a Mastra instance whose observability storage has `getMetricAggregate` (approximate).
   */
  client?: TollgateGuardClient;
  /** Output cap used in the estimate when the step has no `modelSettings.maxOutputTokens`. Default 4,096. */
  defaultMaxOutputTokens?: number;
  /**
   * Exact mode: what a step whose worst case no longer fits becomes. `'block'` (default) denies
   * it as `strategy` says. `'shrink'` asks Tollgate for the most output tokens that still fit
   * (at least `minOutputTokens`) and runs the step capped there: its `maxOutputTokens` is lowered
   * for that step only, the reservation holds the smaller worst case, and the step's result says
   * so in `providerMetadata.tollgate.costGuard` ({@link CostGuardStepReport}). A project policy
   * with `onExceed: 'block'` still denies.
   */
  onExceed?: 'block' | 'shrink';
  /** With `onExceed: 'shrink'`: the fewest output tokens a shrunk step may have. Default 1. */
  minOutputTokens?: number;
  /**
   * Exact mode: a model to run the step on instead when it would be denied on its own model (a
   * cheaper one), if that one fits (shrunk, with `onExceed: 'shrink'`). A model object as an
   * Agent takes it (an AI SDK language model); checked and reserved like any step.
   */
  fallbackModel?: FallbackModel;
  /**
   * Exact mode: wait for each step's usage to be stored before the next step's check. Default
   * false: a step's record is handed to the client when the step ends, without holding the run
   * up, and the client delivers it with its next batch (the SDK: within its `flushIntervalMs`,
   * or with the run's last record, one request for the steps of a short run). Its reservation
   * counts the step at its worst case until the record lands, so the budget never overspends; a
   * check that would deny or shrink while this run's records are not stored yet is asked again
   * once they are, and the last step's record is stored before `generate()` resolves.
   */
  awaitRecords?: boolean;
  /**
   * Exact mode: while a step's tools run, check and reserve the next step ahead of it, so that
   * the next step starts without waiting on Tollgate. Default true. The check ahead is tentative:
   * Tollgate reserves it only when the step fits with nothing to report (no denial, no warning,
   * no shrinking) and logs nothing otherwise. It is sized for the step's messages plus its answer
   * and `checkAheadTokens` for the tool results; the next step takes it when its own estimate is
   * no larger and its model, output cap and limits are the same, and otherwise releases it and is
   * checked as usual. One that no step takes within 30 s (a run that ended after its tools) is
   * released. Needs a client with `guard.release`.
   */
  checkAhead?: boolean;
  /**
   * Input tokens a check ahead holds for the tool results of the step before. Default 1,024. In a
   * run whose tool results were longer, the next checks ahead hold what they took, and a quarter more.
   */
  checkAheadTokens?: number;
  /** BPE rank set used to count the outgoing messages. Default `o200k_base`. */
  encoding?: TiktokenBPE;
  /** Token-count cache for the estimate; share one with a {@link TokenLimiterProcessor} to count once. */
  countCache?: TokenCountCache | false;
  /** Logger; defaults to the registering Mastra instance's logger, else `console`. */
  logger?: LoggerShape;
}

/** Cost usage as reported in TripWire metadata. */
export interface CostGuardUsage {
  estimatedCost: number | null;
  costUnit: string | null;
}

/** Per-provider/model cost, attached when `includeBreakdown` is set (seed-compatible mode). */
export interface CostGuardBreakdownEntry {
  provider: string | null;
  model: string | null;
  estimatedCost: number | null;
  costUnit: string | null;
}

/** A model the step may switch to: an AI SDK language model (Mastra's `MastraLanguageModel`). */
export type FallbackModel = { provider: string; modelId: string; specificationVersion?: string };

/** Metadata of the TripWire raised by the `block` strategy. */
export interface CostGuardTripwireMetadata<Id extends string = 'cost-guard'> {
  processorId: Id;
  /** The cost compared with the limit (exact mode: recorded + reserved + this step's estimate). */
  usage: CostGuardUsage;
  maxCost: number;
  scope: CostScope;
  /** `'<scope>:<id>'`; absent for `run`. */
  scopeKey?: string;
  threshold: 'hard';
  breakdown?: CostGuardBreakdownEntry[];
  /**
   * `'busy'` when the step was blocked because Tollgate's guard stayed busy past
   * `busyDeadlineMs`, not by a budget: `usage` is then null, nothing having been evaluated.
   */
  reason?: 'busy';
}

/** `detail` of the violations passed to `onViolation`. */
export interface CostGuardViolationDetail {
  usage: number;
  limit: number;
  totalUsage: CostGuardUsage;
  scope: CostScope;
  scopeKey?: string;
  threshold: 'soft' | 'hard';
  breakdown?: CostGuardBreakdownEntry[];
}

/** A violation as Mastra's `ProcessorViolation` carries it. */
export interface CostGuardViolation {
  processorId: string;
  message: string;
  detail: unknown;
}

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

interface PendingStep {
  stepIndex: number;
  reservationId?: string;
  provider: string;
  model: string;
  /** The model's provider id as the AI SDK gives it (`anthropic.messages`): it says what its usage means. */
  providerId: string;
  specVersion?: 'v2' | 'v3';
  context: GuardContext;
  recorded: boolean;
}

interface RunState {
  runKey: string;
  pending: PendingStep[];
  notified: Set<'soft' | 'hard'>;
  /** Steps recorded into a buffering client and not flushed by this guard yet (see `awaitRecords`). */
  unflushed: PendingStep[];
  /** Flushes of this run's records not yet answered (and releases of checks ahead not taken). */
  inFlight: Set<Promise<void>>;
  /** The check sent ahead of the next step, while this one runs its tools. */
  ahead?: CheckAhead;
  /** The last step's own check, when it was allowed with nothing to report: the next one's check ahead is made from it. */
  allowed?: { stepNumber: number; request: GuardCheckRequest };
  /** Input tokens the next check ahead holds for tool results: `checkAheadTokens`, or more once this run's took more. */
  aheadRoom?: number;
}

/** What tells the two names of the guard apart: Mastra's ids and texts for each. */
export interface CostGuardLabels<Id extends string> {
  id: Id;
  name: string;
  className: string;
  defaultMessage: string;
  softMessage: (percent: number, usage: string, limit: string) => string;
}

const COST_GUARD: CostGuardLabels<'cost-guard'> = {
  id: 'cost-guard',
  name: 'Cost Guard',
  className: 'CostGuardProcessor',
  defaultMessage: 'Cost guard: cost limit exceeded ({usage}/{limit})',
  softMessage: (percent, usage, limit) => `Cost guard: cost reached ${percent}% of the limit (${usage}/${limit})`,
};

const TOKEN_COST_CONTROL: CostGuardLabels<'token-cost-control'> = {
  id: 'token-cost-control',
  name: 'Token Cost Control',
  className: 'TokenCostControl',
  defaultMessage: 'Cost control: estimated cost limit exceeded ({usage}/{limit})',
  softMessage: (percent, usage, limit) =>
    `Cost control: estimated cost reached ${percent}% of the limit (${usage}/${limit})`,
};

let instances = 0;

/**
 * The cost guard under either of its names ({@link CostGuardProcessor}, {@link TokenCostControl}):
 * they differ only in their id, name and default texts.
 */
export abstract class CostGuardBase<Id extends string> {
  /** Processor id. */
  readonly id: Id;
  /** Display name. */
  readonly name: string;
  private readonly labels: CostGuardLabels<Id>;
  private readonly options: CostGuardOptions;
  private readonly scope: CostScope;
  private readonly window: CostWindow;
  private readonly strategy: 'block' | 'warn';
  private readonly messageTemplate: string;
  private readonly counter: MessageTokenCounter;
  private readonly stateKey = `costGuard:${instances++}`;
  private observability?: ObservabilityCostSource;
  private logger?: LoggerShape;
  private violationHandler?: (violation: CostGuardViolation) => void | Promise<void>;
  /** TripWire metadata already delivered to `onViolation`, so the runner's own call is not a second one. */
  private readonly delivered = new WeakSet<object>();
  /** Whether the warning for a guard with nothing to read the cost from was logged (once per instance). */
  private warnedUnregistered = false;

  protected constructor(options: CostGuardOptions, labels: CostGuardLabels<Id>) {
    const name = labels.className;
    if (typeof options.maxCost === 'number' && (!Number.isFinite(options.maxCost) || options.maxCost <= 0)) {
      throw new RangeError(`${name} requires maxCost to be a finite positive number`);
    }
    if (
      options.warnAtPercent !== undefined &&
      (!Number.isFinite(options.warnAtPercent) || options.warnAtPercent <= 0 || options.warnAtPercent >= 100)
    ) {
      throw new RangeError(`${name} requires warnAtPercent to be a number between 0 and 100 (exclusive)`);
    }
    if (
      options.busyDeadlineMs !== undefined &&
      (!Number.isFinite(options.busyDeadlineMs) || options.busyDeadlineMs < 0)
    ) {
      throw new RangeError(`${name} requires busyDeadlineMs to be a number of milliseconds >= 0`);
    }
    if (options.onExceed !== undefined && options.onExceed !== 'block' && options.onExceed !== 'shrink') {
      throw new RangeError(`${name} requires onExceed to be 'block' or 'shrink'`);
    }
    if (
      options.minOutputTokens !== undefined &&
      (!Number.isInteger(options.minOutputTokens) || options.minOutputTokens < 1)
    ) {
      throw new RangeError(`${name} requires minOutputTokens to be an integer >= 1`);
    }
    if (
      options.checkAheadTokens !== undefined &&
      (!Number.isInteger(options.checkAheadTokens) || options.checkAheadTokens < 0)
    ) {
      throw new RangeError(`${name} requires checkAheadTokens to be an integer >= 0`);
    }
    this.id = labels.id;
    this.name = labels.name;
    this.labels = labels;
    this.options = options;
    this.scope = options.scope ?? 'resource';
    this.window = options.window ?? '7d';
    this.strategy = options.strategy ?? 'block';
    this.messageTemplate = options.message ?? labels.defaultMessage;
    this.logger = options.logger;
    this.counter = new MessageTokenCounter({
      encoding: options.encoding,
      cache: options.countCache ?? new TokenCountCache(),
    });
  }

  /**
   * Called when a limit is crossed or approached, whatever the strategy, once per request and
   * threshold. Errors it throws are swallowed: alerting must not break the agent.
   */
  get onViolation(): ((violation: CostGuardViolation) => Promise<void>) | undefined {
    return this.violationHandler ? this.forwardViolation : undefined;
  }
  set onViolation(handler: ((violation: CostGuardViolation) => void | Promise<void>) | undefined) {
    this.violationHandler = handler;
  }

  // Mastra's runner calls onViolation itself when a processor aborts, with the TripWire metadata
  // as detail. This guard already delivered that violation (with its richer detail) before
  // aborting, so the runner's call is recognised by its metadata object and dropped.
  private readonly forwardViolation = async (violation: CostGuardViolation): Promise<void> => {
    if (violation.detail && typeof violation.detail === 'object' && this.delivered.has(violation.detail)) return;
    try {
      await this.violationHandler?.(violation);
    } catch {
      // Swallowed by contract.
    }
  };

  /**
   * Called by Mastra when the agent is registered. Without a Tollgate client, requires
   * observability storage with `getMetricAggregate` and throws otherwise.
   * @internal
   */
  __registerMastra(mastra: MastraShape): void {
    this.logger ??= mastra.getLogger?.();
    if (this.options.client) return;
    const store = mastra.getStorage?.()?.stores?.observability as ObservabilityStoreShape | undefined;
    if (!store || typeof store.getMetricAggregate !== 'function') {
      throw new Error(
        `${this.labels.className} requires a Tollgate client or observability storage with getMetricAggregate support. Pass \`client\`, or configure observability storage on your Mastra instance.`,
      );
    }
    this.observability = new ObservabilityCostSource(store);
  }

  /**
   * Checks the cost limit before the step's LLM call; settles the previous steps' reservations
   * first. Returns the step's changed model settings (and model) when the step was shrunk or
   * moved to `fallbackModel`, nothing otherwise.
   */
  async processInputStep(args: CostGuardStepArgs<CostGuardTripwireMetadata<Id>>): Promise<CostGuardStepResult | void> {
    const run = this.runState(args.state);
    const ids = readContextIds(args.requestContext, args);
    if (args.runId) ids.runId = args.runId;
    if (this.options.client) await this.settleFromSteps(run, args.steps, ids);

    const id = scopeId(this.scope, ids);
    if (id === undefined) return;
    const maxCost = this.resolveMaxCost(args.requestContext);
    if (maxCost === undefined) return;
    const scopeKey = this.scope === 'run' ? undefined : `${this.scope}:${id}`;

    if (this.options.client) return this.checkWithTollgate(this.options.client, args, run, ids, maxCost, scopeKey);
    if (!this.observability) return this.unregistered(args, maxCost, scopeKey);
    return this.checkWithObservability(this.observability, args, run, id, maxCost, scopeKey);
  }

  /**
   * Records the step's actual usage as soon as the step ends, settling its reservation. Mastra
   * calls this on input processors too, so registering the guard as an input processor is enough.
   * The usage is recorded in Tollgate's meaning whatever the provider (an Anthropic step's cache
   * reads and writes inside its input tokens; see `fromAiSdk`).
   */
  async processLLMResponse(args: CostGuardResponseArgs): Promise<void> {
    const client = this.options.client;
    if (!client || args.fromCache) return;
    const run = this.runState(args.state);
    const step = run.pending.findLast((p) => p.stepIndex === args.stepNumber);
    const finish = args.chunks.find((c) => c.type === 'finish' || c.type === 'step-finish');
    const payload = finish?.payload as FinishPayload | undefined;
    const usage = payload?.output?.usage;
    if (!step || !usage) return;
    // A step that called tools is followed by another (whose check does not wait for this record);
    // any other is the run's last, and its record lands before generate() resolves.
    const last = payload.stepResult?.reason !== 'tool-calls';
    const providerMetadata = payload.providerMetadata ?? payload.metadata?.providerMetadata;
    const stored = this.options.awaitRecords === true;
    const ahead = () => {
      if (last || this.options.checkAhead === false) return;
      const meaning = { provider: step.providerId, providerMetadata, specVersion: step.specVersion };
      const { outputTokens } = fromAiSdk(usage, meaning).usage;
      this.sendAhead(client, run, args.stepNumber, outputTokens ?? 0);
    };
    // The next step's check goes out first, unless it must see this record stored.
    if (!stored) ahead();
    await this.record(client, run, step, usage, providerMetadata, last || stored);
    if (last) return this.drain(run);
    if (stored) ahead();
  }

  /** Checks the step after `stepNumber` ahead of it, while this one runs its tools (see `checkAhead`). */
  private sendAhead(client: TollgateGuardClient, run: RunState, stepNumber: number, outputTokens: number): void {
    const allowed = run.allowed;
    // A client that cannot release would leave a check ahead no step took holding until it expires.
    if (!allowed || allowed.stepNumber !== stepNumber || !client.guard.release) return;
    this.dropAhead(client, run);
    const roomTokens = run.aheadRoom ?? this.options.checkAheadTokens ?? CHECK_AHEAD_TOKENS;
    const request = aheadOf(allowed.request, `${run.runKey}:${stepNumber + 1}:ahead`, outputTokens, roomTokens);
    let answer: Promise<GuardCheckResponse | undefined>;
    try {
      answer = client.guard.check(request, { busyDeadlineMs: 0 }).then(
        (response) => response,
        () => undefined,
      );
    } catch {
      return; // a client that throws at once: the step is checked on its own
    }
    const ahead: CheckAhead = { stepNumber: stepNumber + 1, request, roomTokens, answer };
    ahead.timer = setTimeout(() => run.ahead === ahead && this.dropAhead(client, run), CHECK_AHEAD_HOLD_MS);
    ahead.timer.unref?.();
    run.ahead = ahead;
  }

  /**
   * The answer of the check sent ahead of this step, when it holds what `own` asks and Tollgate
   * took it; undefined otherwise (and a check ahead that holds something else is released).
   */
  private takeAhead(
    client: TollgateGuardClient,
    run: RunState,
    stepNumber: number,
    own: GuardCheckRequest,
  ): Promise<GuardCheckResponse | undefined> | undefined {
    const ahead = run.ahead;
    if (!ahead) return undefined;
    if (ahead.stepNumber !== stepNumber || !covers(ahead.request, own)) {
      // Tool results longer than the room held: the run's next checks ahead hold what these took.
      const took = own.estimate!.inputTokens - (ahead.request.estimate!.inputTokens - ahead.roomTokens);
      if (took > ahead.roomTokens) run.aheadRoom = Math.ceil(took * 1.25);
      this.dropAhead(client, run);
      return undefined;
    }
    run.ahead = undefined;
    clearTimeout(ahead.timer);
    return ahead.answer.then((response) => {
      if (response && fitsPlainly(response)) return response;
      this.releaseUntaken(client, run, response);
      return undefined;
    });
  }

  /** Drops the check ahead: once answered, its reservation (if any) is released. */
  private dropAhead(client: TollgateGuardClient, run: RunState): void {
    const ahead = run.ahead;
    if (!ahead) return;
    run.ahead = undefined;
    clearTimeout(ahead.timer);
    this.releaseUntaken(client, run, ahead.answer);
  }

  /** Releases what a check ahead no step took reserved; the run's drain waits for it. */
  private releaseUntaken(
    client: TollgateGuardClient,
    run: RunState,
    answer: GuardCheckResponse | undefined | Promise<GuardCheckResponse | undefined>,
  ): void {
    const done = Promise.resolve(answer).then(async (response) => {
      if (response?.reservation) await this.released(client, response.reservation.id, 'checked ahead and not taken');
    });
    run.inFlight.add(done);
    void done.finally(() => run.inFlight.delete(done));
  }

  /**
   * The provider rejected the step's LLM call (Mastra calls this on input processors too, for
   * non-retryable API errors): the step used nothing, so its reservation is released at once
   * instead of holding budget until it expires. Never handles the error itself.
   */
  async processAPIError(args: { stepNumber: number; state: Record<string, unknown> }): Promise<void> {
    const client = this.options.client;
    if (!client) return;
    const run = this.runState(args.state);
    const step = run.pending.findLast((p) => p.stepIndex === args.stepNumber && !p.recorded);
    if (step?.reservationId && client.guard.release) {
      step.recorded = true; // nothing to record: the call produced no usage
      try {
        await client.guard.release(step.reservationId);
      } catch (error) {
        this.log(
          `Cost guard: could not release the reservation of step ${step.stepIndex}: ${(error as Error)?.message ?? String(error)}`,
        );
      }
    }
    // The run may end here: the steps that ran are stored before the error reaches the caller.
    await this.drain(run);
  }

  private async checkWithTollgate(
    client: TollgateGuardClient,
    args: CostGuardStepArgs<CostGuardTripwireMetadata<Id>>,
    run: RunState,
    ids: GuardContext,
    maxCost: number,
    scopeKey: string | undefined,
  ): Promise<CostGuardStepResult | void> {
    const entityName = args.agent?.name ?? args.agent?.id;
    const context: GuardContext = { ...ids, entityType: 'agent', ...(entityName ? { entityName } : {}) };
    const failMode = this.options.failMode ?? 'open';
    const requestedMaxOutputTokens =
      args.modelSettings?.maxOutputTokens ?? this.options.defaultMaxOutputTokens ?? 4_096;
    const minOutputTokens = this.options.minOutputTokens ?? 1;
    // A step already at (or under) the floor cannot be shrunk: it is checked as it is.
    const shrink = this.options.onExceed === 'shrink' && requestedMaxOutputTokens > minOutputTokens;
    const inputTokens = this.estimateInputTokens(args);
    // A step Mastra runs again (after an API error) is a new step for Tollgate; a busy retry is not.
    const stepId = `${run.runKey}:${args.stepNumber}${attempt(run, args.stepNumber)}`;
    const requestFor = (model: ModelShape | undefined, id: string): GuardCheckRequest => {
      const ids = modelIds(model);
      return {
        context,
        limits: [
          {
            scope: this.scope,
            ...(this.scope === 'run' ? {} : { window: this.window }),
            maxCost,
            ...(this.options.warnAtPercent !== undefined ? { warnAtPercent: this.options.warnAtPercent } : {}),
          },
        ],
        estimate: { provider: ids.provider, model: ids.model, inputTokens, maxOutputTokens: requestedMaxOutputTokens },
        reserve: true,
        stepId: id,
        failMode,
        ...(shrink ? { onExceed: 'shrink' as const, minOutputTokens } : {}),
      };
    };
    const step = this.pendingStep(args.stepNumber, args.model, context);
    const own = requestFor(args.model, stepId);
    const early = this.takeAhead(client, run, args.stepNumber, own);
    let response: GuardCheckResponse;
    let elapsedMs: number;
    // This run's records in flight when the check is sent may be counted at their reservations
    // (the worst case): an answer that binds is asked again once they landed, so that it binds on
    // what was spent.
    const racing = run.unflushed.length > 0 || run.inFlight.size > 0;
    try {
      const ahead = early && (await early);
      if (ahead) ({ response, elapsedMs } = { response: ahead, elapsedMs: 0 });
      else ({ response, elapsedMs } = await this.ask(client, own));
      if (!ahead && racing && binds(response)) {
        await this.drain(run);
        if (!response.adjust) ({ response, elapsedMs } = await this.ask(client, requestFor(args.model, stepId)));
        else if (
          response.reservation &&
          client.guard.release &&
          (await this.released(client, response.reservation.id, 'to check again'))
        ) {
          ({ response, elapsedMs } = await this.ask(client, requestFor(args.model, `${stepId}:settled`)));
        }
      }
    } catch (error) {
      run.pending.push(step);
      await this.drain(run);
      return this.unavailable(args, maxCost, scopeKey, error);
    }
    step.reservationId = response.reservation?.id;
    run.pending.push(step);
    run.allowed = fitsPlainly(response) ? { stepNumber: args.stepNumber, request: own } : undefined;
    // Before the check below: a busy answer is a deny without violations too, but not an outage.
    if (isBusy(response)) {
      await this.drain(run);
      return this.busy(args, maxCost, scopeKey, elapsedMs);
    }
    // The SDK answers for an unreachable service itself: fail-closed comes back as a deny with no violation.
    if (response.decision === 'deny' && response.violations.length === 0) {
      await this.drain(run);
      return this.unavailable(args, maxCost, scopeKey, new Error(response.reason ?? 'denied without a violation'));
    }

    // Our own limit first; a project policy (source 'policy:<name>') or another limit type can deny the step too.
    const ours = (f: GuardFinding) => f.source === 'request' && f.scope === this.scope && f.limitType === 'cost';
    const hard =
      response.decision === 'deny'
        ? (response.violations.find(ours) ??
          response.violations.find((v) => v.limitType === 'cost') ??
          response.violations[0])
        : undefined;
    if (hard) {
      const moved = await this.tryFallback(
        client,
        args,
        run,
        step,
        response.violations,
        requestFor,
        `${stepId}:fallback`,
        requestedMaxOutputTokens,
      );
      if (moved) return moved;
      // The run ends here: the steps that ran are stored before the abort reaches the caller.
      await this.drain(run);
      return this.violate(args, run, maxCost, scopeKey, finding(hard));
    }
    const soft = response.warnings.find((w) => ours(w) && w.threshold === 'soft');
    if (soft) await this.warnSoft(run, scopeKey, finding(soft));
    if (response.adjust) return this.adjusted(args, response.adjust, args.model, undefined, requestedMaxOutputTokens);
  }

  /** Releases a reservation; false when that fails (logged, with `why`): a shrunk answer then stands, as cautious as it was. */
  private async released(client: TollgateGuardClient, reservationId: string, why: string): Promise<boolean> {
    try {
      await client.guard.release!(reservationId);
      return true;
    } catch (error) {
      this.log(
        `Cost guard: could not release reservation ${reservationId} ${why}: ${(error as Error)?.message ?? String(error)}`,
      );
      return false;
    }
  }

  /** `client.guard.check`, retried while Tollgate answers busy, within `busyDeadlineMs`. */
  private ask(client: TollgateGuardClient, request: GuardCheckRequest) {
    return checkUntilServed(client, request, this.options.busyDeadlineMs ?? 10_000);
  }

  private pendingStep(stepIndex: number, model: ModelShape | undefined, context: GuardContext): PendingStep {
    const { provider, model: modelId } = modelIds(model);
    return { stepIndex, provider, model: modelId, ...usageMeaning(model, provider), context, recorded: false };
  }

  /**
   * The step does not fit on its own model: when a `fallbackModel` is configured (another
   * model), the step is checked and reserved on it, and runs on it if that fits. Undefined when
   * it does not (or cannot be asked): the step is then denied on its own model's finding.
   */
  private async tryFallback(
    client: TollgateGuardClient,
    args: CostGuardStepArgs<CostGuardTripwireMetadata<Id>>,
    run: RunState,
    denied: PendingStep,
    violations: GuardFinding[],
    requestFor: (model: ModelShape | undefined, id: string) => GuardCheckRequest,
    stepId: string,
    requestedMaxOutputTokens: number,
  ): Promise<CostGuardStepResult | undefined> {
    const fallback = this.options.fallbackModel;
    if (!fallback) return undefined;
    const target = modelIds(fallback);
    if (target.provider === denied.provider && target.model === denied.model) return undefined;
    let response: GuardCheckResponse;
    try {
      ({ response } = await this.ask(client, requestFor(fallback, stepId)));
    } catch (error) {
      this.log(
        `Cost guard: could not check step ${args.stepNumber} on the fallback model ${target.provider}/${target.model}: ${(error as Error)?.message ?? String(error)}`,
      );
      return undefined;
    }
    if (response.decision !== 'allow' || response.reason) return undefined;
    // The step runs on the fallback: its usage settles the fallback's reservation, under its ids.
    run.pending.splice(run.pending.indexOf(denied), 1);
    run.pending.push({
      ...this.pendingStep(args.stepNumber, fallback, denied.context),
      reservationId: response.reservation?.id,
    });
    const adjust = response.adjust ?? {
      maxOutputTokens: requestedMaxOutputTokens,
      requestedMaxOutputTokens,
      limitedBy: [],
    };
    return this.adjusted(args, { ...adjust, limitedBy: violations }, fallback, args.model, requestedMaxOutputTokens);
  }

  /** The step's changed settings, and its model wrapped so that its result reports the change. */
  private adjusted(
    args: CostGuardStepArgs<CostGuardTripwireMetadata<Id>>,
    adjust: GuardAdjust,
    model: ModelShape | FallbackModel | undefined,
    movedFrom: ModelShape | undefined,
    requestedMaxOutputTokens: number,
  ): CostGuardStepResult {
    const name = (m: ModelShape | undefined) => {
      const { provider, model: modelId } = modelIds(m);
      return `${provider}/${modelId}`;
    };
    const report: CostGuardStepReport = {
      processorId: this.id,
      maxOutputTokens: adjust.maxOutputTokens,
      requestedMaxOutputTokens,
      ...(movedFrom !== undefined ? { model: name(model), requestedModel: name(movedFrom) } : {}),
      limitedBy: adjust.limitedBy.map((f) => ({
        scopeKey: f.scopeKey,
        limitType: f.limitType,
        usage: f.usage,
        limit: f.limit,
        unit: f.unit,
        source: f.source,
      })),
    };
    return {
      ...(adjust.maxOutputTokens < requestedMaxOutputTokens
        ? { modelSettings: { ...args.modelSettings, maxOutputTokens: adjust.maxOutputTokens } }
        : {}),
      model: reportingModel(model, report),
    };
  }

  private async checkWithObservability(
    source: ObservabilityCostSource,
    args: CostGuardStepArgs<CostGuardTripwireMetadata<Id>>,
    run: RunState,
    id: string,
    maxCost: number,
    scopeKey: string | undefined,
  ): Promise<void> {
    let cost: CostGuardUsage;
    try {
      cost = await source.cost(this.scope, id, this.window);
    } catch (error) {
      return this.unavailable(args, maxCost, scopeKey, error);
    }
    const spent = cost.estimatedCost ?? 0;
    const unit = cost.costUnit ?? 'USD';
    // Read only for a finding that is reported: a request warns once per threshold.
    const breakdown = (threshold: 'soft' | 'hard') =>
      this.options.includeBreakdown && !run.notified.has(threshold)
        ? source.breakdown(this.scope, id, this.window).catch(() => undefined)
        : Promise.resolve(undefined);
    if (spent >= maxCost)
      return this.violate(args, run, maxCost, scopeKey, {
        usage: spent,
        limit: maxCost,
        unit,
        breakdown: await breakdown('hard'),
      });
    if (this.options.warnAtPercent !== undefined && spent >= (maxCost * this.options.warnAtPercent) / 100) {
      await this.warnSoft(run, scopeKey, { usage: spent, limit: maxCost, unit, breakdown: await breakdown('soft') });
    }
  }

  private async violate(
    args: CostGuardStepArgs<CostGuardTripwireMetadata<Id>>,
    run: RunState,
    maxCost: number,
    scopeKey: string | undefined,
    f: Finding,
  ): Promise<void> {
    const message = formatViolationMessage(this.messageTemplate, f.usage, f.limit);
    const totalUsage = { estimatedCost: f.usage, costUnit: f.unit };
    const detail: CostGuardViolationDetail = {
      usage: f.usage,
      limit: f.limit,
      totalUsage,
      scope: this.scope,
      ...(scopeKey ? { scopeKey } : {}),
      threshold: 'hard',
      ...(f.breakdown ? { breakdown: f.breakdown } : {}),
    };
    if (this.strategy === 'warn') return this.warnOnce(run, 'hard', message, detail);
    const metadata: CostGuardTripwireMetadata<Id> = {
      processorId: this.id,
      usage: totalUsage,
      maxCost,
      scope: this.scope,
      ...(scopeKey ? { scopeKey } : {}),
      threshold: 'hard',
      ...(f.breakdown ? { breakdown: f.breakdown } : {}),
    };
    this.delivered.add(metadata);
    await this.notifyOnce(run, 'hard', message, detail);
    args.abort(message, { retry: false, metadata });
  }

  private async warnSoft(run: RunState, scopeKey: string | undefined, f: Finding): Promise<void> {
    const message = this.labels.softMessage(this.options.warnAtPercent!, formatCost(f.usage), formatCost(f.limit));
    await this.warnOnce(run, 'soft', message, {
      usage: f.usage,
      limit: f.limit,
      totalUsage: { estimatedCost: f.usage, costUnit: f.unit },
      scope: this.scope,
      ...(scopeKey ? { scopeKey } : {}),
      threshold: 'soft',
      ...(f.breakdown ? { breakdown: f.breakdown } : {}),
    });
  }

  /**
   * A warning (a soft threshold, or a hard one under `strategy: 'warn'`): logged and passed to
   * `onViolation` once per request and threshold, as Mastra's TokenCostControl does, however many
   * of the request's steps find the budget crossed.
   */
  private async warnOnce(
    run: RunState,
    threshold: 'soft' | 'hard',
    message: string,
    detail: CostGuardViolationDetail,
  ): Promise<void> {
    if (run.notified.has(threshold)) return;
    this.log(message);
    await this.notifyOnce(run, threshold, message, detail);
  }

  private async notifyOnce(
    run: RunState,
    threshold: 'soft' | 'hard',
    message: string,
    detail: CostGuardViolationDetail,
  ): Promise<void> {
    if (run.notified.has(threshold)) return;
    run.notified.add(threshold);
    if (!this.violationHandler) return;
    try {
      await this.violationHandler({ processorId: this.id, message, detail });
    } catch (error) {
      this.log('Cost guard: onViolation callback threw', error);
    }
  }

  /**
   * Tollgate's guard stayed busy past `busyDeadlineMs`: nothing was evaluated or reserved. A deny
   * (failMode is for an unreachable guard, and this one answered), but not a budget violation:
   * the guard does not call onViolation (Mastra's runner does, on the abort, with metadata whose
   * `reason: 'busy'` says so), and the message says what happened.
   */
  private busy(
    args: CostGuardStepArgs<CostGuardTripwireMetadata<Id>>,
    maxCost: number,
    scopeKey: string | undefined,
    elapsedMs: number,
  ): void {
    const why = `Cost guard: Tollgate's guard was busy (too many checks queued on this step's scopes) and still was after ${elapsedMs} ms of retries`;
    if (this.strategy === 'warn') {
      this.log(`${why}; letting the step run unreserved (strategy 'warn'); no budget was checked`);
      return;
    }
    args.abort(`${why}; blocking the step; no budget was checked`, {
      retry: false,
      metadata: {
        processorId: this.id,
        usage: { estimatedCost: null, costUnit: null },
        maxCost,
        scope: this.scope,
        ...(scopeKey ? { scopeKey } : {}),
        threshold: 'hard',
        reason: 'busy',
      },
    });
  }

  private unavailable(
    args: CostGuardStepArgs<CostGuardTripwireMetadata<Id>>,
    maxCost: number,
    scopeKey: string | undefined,
    error: unknown,
  ): void {
    const reason = (error as Error)?.message ?? String(error);
    if (this.options.failMode !== 'closed') {
      this.log(`Cost guard: cost check failed, allowing the step (fail-open): ${reason}`);
      return;
    }
    args.abort(`Cost guard: cost check failed, blocking the step (fail-closed): ${reason}`, {
      retry: false,
      metadata: {
        processorId: this.id,
        usage: { estimatedCost: null, costUnit: null },
        maxCost,
        scope: this.scope,
        ...(scopeKey ? { scopeKey } : {}),
        threshold: 'hard',
      },
    });
  }

  /**
   * No Tollgate client, and never registered with a Mastra instance (whose registration would
   * have thrown without observability storage): nothing to read the cost from. The specification
   * fails open when the cost cannot be read, so the step runs (a warning, once), unless
   * `failMode: 'closed'`.
   */
  private unregistered(
    args: CostGuardStepArgs<CostGuardTripwireMetadata<Id>>,
    maxCost: number,
    scopeKey: string | undefined,
  ): void {
    const why = `${this.labels.className} has no Tollgate client and was not registered with a Mastra instance, so it has no observability storage to read the cost from`;
    if (this.options.failMode === 'closed') {
      args.abort(`Cost guard: ${why}; blocking the step (fail-closed)`, {
        retry: false,
        metadata: {
          processorId: this.id,
          usage: { estimatedCost: null, costUnit: null },
          maxCost,
          scope: this.scope,
          ...(scopeKey ? { scopeKey } : {}),
          threshold: 'hard',
        },
      });
    }
    if (this.warnedUnregistered) return;
    this.warnedUnregistered = true;
    this.log(
      `Cost guard: ${why}; the cost is not checked and steps run (fail-open). Pass \`client\`, or register the agent with a Mastra instance that has observability storage.`,
    );
  }

  /**
   * Records every earlier step of this run whose usage was not recorded yet, from `steps`. This
   * is the fallback when `processLLMResponse` did not run (an older Mastra, or a failed record).
   */
  private async settleFromSteps(run: RunState, steps: CostGuardStepArgs['steps'], ids: GuardContext): Promise<void> {
    const client = this.options.client!;
    for (const step of run.pending) {
      if (step.recorded) continue;
      const done = steps[step.stepIndex];
      if (!done?.usage) continue;
      step.context = { ...ids, ...step.context };
      await this.record(client, run, step, done.usage, done.providerMetadata, this.options.awaitRecords === true);
    }
  }

  /**
   * Records the step's usage, which settles its reservation. With `wait`, resolves once it is
   * stored. Otherwise once it is handed to the client: a buffering client (the SDK) delivers it
   * with its next batch, within its flush interval, or with the run's last record, whichever
   * comes first — one request for several steps, none on the next step's path — and
   * {@link drain} flushes it when the run needs it stored.
   */
  private async record(
    client: TollgateGuardClient,
    run: RunState,
    step: PendingStep,
    usage: StepUsageShape,
    providerMetadata: Readonly<Record<string, unknown>> | undefined,
    wait: boolean,
  ): Promise<void> {
    if (step.recorded) return;
    step.recorded = true;
    const c = step.context;
    // Providers disagree on what input tokens are (Anthropic's leave the cache out), and AI SDK 5
    // passes each one's meaning through. An event with cache reads above its input total would be
    // refused, leaving the reservation to hold the worst case until it expires.
    const normalized = fromAiSdk(usage, { provider: step.providerId, providerMetadata, specVersion: step.specVersion });
    const event: StepUsageEvent = {
      eventId: `${run.runKey}:${step.stepIndex}`,
      occurredAt: new Date().toISOString(),
      traceId: c.traceId ?? c.runId ?? run.runKey,
      ...pick(c, ['runId', 'threadId', 'resourceId', 'userId', 'organizationId', 'sessionId', 'entityName']),
      entityType: c.entityType ?? 'agent',
      provider: step.provider,
      model: step.model,
      usage: normalized.usage,
      ...(step.reservationId ? { reservationId: step.reservationId } : {}),
      stepIndex: step.stepIndex,
    };
    try {
      await client.events.record(event);
    } catch (error) {
      return this.unrecorded([step], error);
    }
    // A client without flush has sent it. Until a record is stored, Tollgate counts its step at
    // the reservation (the worst case), so the budget never overspends meanwhile.
    if (!client.events.flush) return;
    run.unflushed.push(step);
    if (wait) await this.drain(run);
  }

  /**
   * Left unrecorded on failure: the next step records them again (same eventId, so Tollgate
   * deduplicates). An unrecorded reservation holds the worst case until it expires, then stops counting.
   */
  private unrecorded(steps: PendingStep[], error: unknown): void {
    for (const step of steps) step.recorded = false;
    this.log(
      `Cost guard: could not record the usage of step ${steps.map((s) => s.stepIndex).join(', ')}: ${(error as Error)?.message ?? String(error)}`,
    );
  }

  /** Flushes this run's records handed to the client, and waits until every one is stored (or failed). */
  private async drain(run: RunState): Promise<void> {
    const flush = this.options.client?.events.flush;
    if (run.unflushed.length && flush) {
      const steps = run.unflushed.splice(0);
      let delivery: Promise<unknown>;
      try {
        delivery = Promise.resolve(flush.call(this.options.client!.events));
      } catch (error) {
        delivery = Promise.reject(error);
      }
      const tracked: Promise<void> = delivery.then(
        () => undefined,
        (error: unknown) => this.unrecorded(steps, error),
      );
      run.inFlight.add(tracked);
      void tracked.finally(() => run.inFlight.delete(tracked));
    }
    while (run.inFlight.size) await Promise.all([...run.inFlight]);
  }

  /** Outgoing messages of the step, counted exactly, plus the conversation overhead. */
  private estimateInputTokens(args: Pick<CostGuardStepArgs, 'messageList' | 'messages' | 'systemMessages'>): number {
    const messages = args.messageList?.get.all.db() ?? args.messages ?? [];
    const systemMessages = args.messageList?.getAllSystemMessages() ?? args.systemMessages ?? [];
    let tokens = TOKENS_PER_CONVERSATION;
    for (const system of systemMessages) tokens += this.counter.countSystemMessage(system);
    for (const message of messages) tokens += this.counter.countMessage(message);
    return tokens;
  }

  private resolveMaxCost(requestContext: RequestContextShape | undefined): number | undefined {
    const { maxCost } = this.options;
    if (typeof maxCost === 'number') return maxCost;
    let value: unknown;
    try {
      value = maxCost(requestContext);
    } catch (error) {
      this.log('Cost guard: maxCost function threw; skipping the check', error);
      return undefined;
    }
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      this.log(`Cost guard: maxCost function returned ${String(value)}; skipping the check`);
      return undefined;
    }
    return value;
  }

  private runState(state: Record<string, unknown>): RunState {
    let run = state[this.stateKey] as RunState | undefined;
    if (!run) {
      run = { runKey: randomUUID(), pending: [], notified: new Set(), unflushed: [], inFlight: new Set() };
      state[this.stateKey] = run;
    }
    return run;
  }

  private log(message: string, error?: unknown): void {
    const logger = this.logger ?? console;
    if (error === undefined) logger.warn(message);
    else logger.warn(message, { error });
  }
}

/**
 * Enforces a cost limit before every LLM call of an agent run (`processInputStep`).
 *
 * With a Tollgate `client` it is exact: each step asks Tollgate's guard with an estimate of the
 * step (outgoing messages counted with js-tiktoken, output capped by `maxOutputTokens`) and
 * reserves that worst case; the step's actual usage is recorded afterwards (`processLLMResponse`,
 * or at the next step from `steps`), which settles the reservation. Concurrent runs on one
 * budget therefore cannot overspend it. Without a client it reads Mastra's observability store
 * like `@mastra/core`'s own cost guard (approximate: metrics land with a delay).
 *
 * @example
 * ```ts
 * const costGuard = new CostGuardProcessor({ maxCost: 5, scope: 'thread', window: '24h', client: tollgate });
 * costGuard.onViolation = ({ detail }) => alert(detail);
 * new Agent({ …, inputProcessors: [costGuard] });
 * ```
 */
export class CostGuardProcessor extends CostGuardBase<'cost-guard'> {
  constructor(options: CostGuardOptions) {
    super(options, COST_GUARD);
  }
}

/**
 * The same guard under the name `@mastra/core` gives it from 1.59 on, with Mastra's id
 * (`'token-cost-control'`, also in its TripWire metadata), name (`'Token Cost Control'`) and
 * default texts (`'Cost control: estimated cost limit exceeded ({usage}/{limit})'`), and the same
 * options: code written for Mastra's `TokenCostControl` moves over by changing its import, and
 * gains the exact mode by passing `client`.
 *
 * @example
 * ```ts
 * import { TokenCostControl } from '@tollgate/processors'; // was '@mastra/core/processors'
 * const guard = new TokenCostControl({ maxCost: 10, scope: 'resource', window: '30d', client: tollgate });
 * ```
 */
export class TokenCostControl extends CostGuardBase<'token-cost-control'> {
  constructor(options: TokenCostControlOptions) {
    super(options, TOKEN_COST_CONTROL);
  }
}

/** Options of {@link TokenCostControl}: those of {@link CostGuardProcessor}. */
export type TokenCostControlOptions = CostGuardOptions;
/** Metadata of the TripWire {@link TokenCostControl} raises. */
export type TokenCostControlTripwireMetadata = CostGuardTripwireMetadata<'token-cost-control'>;
/** `detail` of {@link TokenCostControl}'s violations. */
export type TokenCostControlViolationDetail = CostGuardViolationDetail;
/** Cost usage as {@link TokenCostControl} reports it. */
export type TokenCostControlUsage = CostGuardUsage;
/** Per-provider/model cost entry of {@link TokenCostControl}'s violations. */
export type TokenCostControlBreakdownEntry = CostGuardBreakdownEntry;

interface Finding {
  usage: number;
  limit: number;
  unit: string;
  breakdown?: CostGuardBreakdownEntry[];
}

function finding(f: GuardFinding): Finding {
  return { usage: f.usage, limit: f.limit, unit: f.unit };
}

/** The `finish` chunk's payload, as far as recording reads it. */
interface FinishPayload {
  /** `reason: 'tool-calls'` when the run goes on with another step. */
  stepResult?: { reason?: string };
  output?: { usage?: StepUsageShape };
  providerMetadata?: Readonly<Record<string, unknown>>;
  metadata?: { providerMetadata?: Readonly<Record<string, unknown>> };
}

/** What the step's usage will mean: the model's full provider id (`anthropic.messages`) and spec version. */
function usageMeaning(
  model: ModelShape | undefined,
  provider: string,
): Pick<PendingStep, 'providerId' | 'specVersion'> {
  if (typeof model !== 'object' || model === null) return { providerId: provider };
  const spec = (model as { specificationVersion?: unknown }).specificationVersion;
  return { providerId: model.provider ?? provider, ...(spec === 'v2' || spec === 'v3' ? { specVersion: spec } : {}) };
}

/** An answer that stops or shrinks the step (a busy or unreachable guard's is not about the budget). */
function binds(response: GuardCheckResponse): boolean {
  if (response.adjust) return true;
  return response.decision === 'deny' && response.violations.length > 0 && !response.reason;
}

function attempt(run: RunState, stepIndex: number): string {
  const earlier = run.pending.filter((p) => p.stepIndex === stepIndex).length;
  return earlier === 0 ? '' : `:${earlier}`;
}

function pick<T extends object, K extends keyof T>(from: T, keys: K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const key of keys) if (from[key] !== undefined) out[key] = from[key];
  return out;
}
