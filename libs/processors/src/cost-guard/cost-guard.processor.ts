import type { LoggerShape } from '../mastra-shapes';
import { TokenCountCache } from '../token-count/count-cache';
import { MessageTokenCounter } from '../token-count/message-token-counter';
import { readContextIds, scopeId } from '../tollgate/context-ids';
import { ExactMode } from './exact-mode';
import { COST_GUARD, TOKEN_COST_CONTROL, type CostGuardLabels } from './labels';
import type { CostGuardResponseArgs, CostGuardStepArgs, CostGuardStepResult, MastraShape } from './mastra-args';
import { ObservabilityCostSource, type ObservabilityStoreShape } from './observability-cost-source';
import { ObservabilityMode } from './observability-mode';
import { maxCostFor, validateOptions, type CostGuardOptions, type GuardConfig } from './options';
import {
  StepOutcomes,
  type CostGuardBreakdownEntry,
  type CostGuardTripwireMetadata,
  type CostGuardUsage,
  type CostGuardViolation,
  type CostGuardViolationDetail,
} from './outcomes';
import { runStateIn, type RunState } from './run-state';

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
  private readonly config: GuardConfig<Id>;
  private readonly outcomes: StepOutcomes<Id>;
  /** With a Tollgate client. */
  private readonly exact?: ExactMode<Id>;
  /** Without one, once registered with a Mastra instance. */
  private observability?: ObservabilityMode<Id>;
  private readonly stateKey = `costGuard:${instances++}`;
  private logger?: LoggerShape;

  protected constructor(options: CostGuardOptions, labels: CostGuardLabels<Id>) {
    validateOptions(options, labels.className);
    this.id = labels.id;
    this.name = labels.name;
    this.logger = options.logger;
    this.config = {
      id: labels.id,
      labels,
      options,
      scope: options.scope ?? 'resource',
      window: options.window ?? '7d',
      strategy: options.strategy ?? 'block',
      log: (message, error) => this.log(message, error),
    };
    this.outcomes = new StepOutcomes(this.config);
    const counter = new MessageTokenCounter({
      encoding: options.encoding,
      cache: options.countCache ?? new TokenCountCache(),
    });
    if (options.client) this.exact = new ExactMode(this.config, options.client, counter, this.outcomes);
  }

  /**
   * Called when a limit is crossed or approached, whatever the strategy, once per request and
   * threshold. Errors it throws are swallowed: alerting must not break the agent.
   */
  get onViolation(): ((violation: CostGuardViolation) => Promise<void>) | undefined {
    return this.outcomes.onViolation;
  }
  set onViolation(handler: ((violation: CostGuardViolation) => void | Promise<void>) | undefined) {
    this.outcomes.onViolation = handler;
  }

  /**
   * Called by Mastra when the agent is registered. Without a Tollgate client, requires
   * observability storage with `getMetricAggregate` and throws otherwise.
   * @internal
   */
  __registerMastra(mastra: MastraShape): void {
    this.logger ??= mastra.getLogger?.();
    if (this.exact) return;
    const store = mastra.getStorage?.()?.stores?.observability as ObservabilityStoreShape | undefined;
    if (!store || typeof store.getMetricAggregate !== 'function') {
      throw new Error(
        `${this.config.labels.className} requires a Tollgate client or observability storage with getMetricAggregate support. Pass \`client\`, or configure observability storage on your Mastra instance.`,
      );
    }
    this.observability = new ObservabilityMode(this.config, new ObservabilityCostSource(store), this.outcomes);
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
    if (this.exact) await this.exact.settleFromSteps(run, args.steps, ids);

    const { scope } = this.config;
    const id = scopeId(scope, ids);
    if (id === undefined) return;
    const maxCost = maxCostFor(this.config.options.maxCost, args.requestContext, this.config.log);
    if (maxCost === undefined) return;
    const scopeKey = scope === 'run' ? undefined : `${scope}:${id}`;

    if (this.exact) return this.exact.checkStep(args, run, ids, maxCost, scopeKey);
    if (!this.observability) return this.outcomes.unregistered(args, maxCost, scopeKey);
    return this.observability.checkStep(args, run, id, maxCost, scopeKey);
  }

  /**
   * Records the step's actual usage as soon as the step ends, settling its reservation. Mastra
   * calls this on input processors too, so registering the guard as an input processor is enough.
   * The usage is recorded in Tollgate's meaning whatever the provider (an Anthropic step's cache
   * reads and writes inside its input tokens; see `fromAiSdk`).
   */
  async processLLMResponse(args: CostGuardResponseArgs): Promise<void> {
    if (!this.exact || args.fromCache) return;
    return this.exact.onLLMResponse(args, this.runState(args.state));
  }

  /**
   * The provider rejected the step's LLM call (Mastra calls this on input processors too, for
   * non-retryable API errors): the step used nothing, so its reservation is released at once
   * instead of holding budget until it expires. Never handles the error itself.
   */
  async processAPIError(args: { stepNumber: number; state: Record<string, unknown> }): Promise<void> {
    if (!this.exact) return;
    return this.exact.onAPIError(args, this.runState(args.state));
  }

  private runState(state: Record<string, unknown>): RunState {
    return runStateIn(state, this.stateKey);
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
