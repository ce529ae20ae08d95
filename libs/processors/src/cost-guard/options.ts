import type { TiktokenBPE } from 'js-tiktoken/lite';
import type { LoggerShape, RequestContextShape } from '../mastra-shapes';
import type { TokenCountCache } from '../token-count/count-cache';
import type { GuardScope, GuardWindow, TollgateGuardClient } from '../tollgate/guard-client';
import type { CostGuardLabels } from './labels';

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

/** A model the step may switch to: an AI SDK language model (Mastra's `MastraLanguageModel`). */
export type FallbackModel = { provider: string; modelId: string; specificationVersion?: string };

/** Throws a RangeError naming the first option out of its range (`name`: the class, which says whose). */
export function validateOptions(options: CostGuardOptions, name: string): void {
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
}

/** Where the guard's parts log: the logger given, else the registering Mastra instance's, else `console`. */
export type GuardLog = (message: string, error?: unknown) => void;

/** What every part of the guard reads: its labels, its options with their defaults, and its log. */
export interface GuardConfig<Id extends string> {
  readonly id: Id;
  readonly labels: CostGuardLabels<Id>;
  readonly options: CostGuardOptions;
  readonly scope: CostScope;
  readonly window: CostWindow;
  readonly strategy: 'block' | 'warn';
  readonly log: GuardLog;
}

/** This request's `maxCost`, or undefined (logged) when its function throws or returns no finite positive number: the check is skipped. */
export function maxCostFor(
  maxCost: CostGuardOptions['maxCost'],
  requestContext: RequestContextShape | undefined,
  log: GuardLog,
): number | undefined {
  if (typeof maxCost === 'number') return maxCost;
  let value: unknown;
  try {
    value = maxCost(requestContext);
  } catch (error) {
    log('Cost guard: maxCost function threw; skipping the check', error);
    return undefined;
  }
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    log(`Cost guard: maxCost function returned ${String(value)}; skipping the check`);
    return undefined;
  }
  return value;
}
