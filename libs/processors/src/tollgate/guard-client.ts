/**
 * What the processors need from a Tollgate client: `POST /v1/guard/check`, reservation release and
 * step usage recording. Structural, so `TollgateClient` from `@tollgate/sdk` fits as it is
 * (`test/sdk-compat.typecheck.ts` checks that under `tsc`), and so does a hand-written HTTP
 * wrapper. The shapes are the service's own (`libs/contracts/src/guard.ts`), copied so this
 * package loads without the SDK.
 */

import type { UsageCounts } from './normalize-usage';

/** Scopes a limit can apply to. */
export type GuardScope = 'run' | 'thread' | 'resource' | 'user' | 'organization' | 'session';

/** Aggregation windows. Ignored for the `run` scope. */
export type GuardWindow = '1h' | '6h' | '24h' | '7d' | '30d' | '365d';

/** Ids that place a step in its scopes. The run is the trace; `runId` stands in when there is no `traceId`. */
export interface GuardContext {
  traceId?: string;
  runId?: string;
  threadId?: string;
  resourceId?: string;
  userId?: string;
  organizationId?: string;
  sessionId?: string;
  entityType?: string;
  entityName?: string;
}

/** A limit evaluated by the guard. At least one max is required. */
export interface GuardLimit {
  scope: GuardScope;
  /** Default `'7d'`; ignored for `run`. */
  window?: GuardWindow;
  maxCost?: number;
  maxTotalTokens?: number;
  maxInputTokens?: number;
  maxOutputTokens?: number;
  /** Soft threshold, as a percentage of each max (exclusive 0–100), that produces a warning. */
  warnAtPercent?: number;
}

/** The step about to run. */
export interface GuardEstimate {
  provider: string;
  model: string;
  inputTokens: number;
  maxOutputTokens: number;
}

/** Request body of `POST /v1/guard/check`. */
export interface GuardCheckRequest {
  context: GuardContext;
  limits?: GuardLimit[];
  /** With `reserve`, its worst-case cost is held until the step's usage is recorded. */
  estimate?: GuardEstimate;
  /** Needs `estimate` and `stepId`. */
  reserve?: boolean;
  /** Idempotency key of the step: a retried check returns the same reservation. */
  stepId?: string;
  failMode?: 'open' | 'closed';
  /** Evaluate without reserving or auditing anything. */
  dryRun?: boolean;
  /** `'shrink'`: a step that does not fit may be allowed with fewer output tokens (the answer's `adjust`). Default `'block'`. */
  onExceed?: 'block' | 'shrink';
  /** The fewest output tokens a shrunk step may have (default 1, at most `estimate.maxOutputTokens`). */
  minOutputTokens?: number;
  /**
   * Needs `reserve`: reserve only when the step fits with nothing to report; otherwise nothing is
   * reserved or logged, and the answer is a deny with `reason: 'tentative'`.
   */
  tentative?: boolean;
}

/** How a step that did not fit may run: capped at `maxOutputTokens` output tokens. */
export interface GuardAdjust {
  /** The most output tokens that fit every limit; the reservation holds this many. */
  maxOutputTokens: number;
  /** The request's `estimate.maxOutputTokens`. */
  requestedMaxOutputTokens: number;
  /** What the step would have been denied for at its full size. */
  limitedBy: GuardFinding[];
}

/** One limit reached (violation) or approached (warning). */
export interface GuardFinding {
  scope: GuardScope;
  /** `'<scope>:<id>'`, e.g. `'resource:abc'`. */
  scopeKey: string;
  /** `null` for `run`. */
  window: GuardWindow | null;
  limitType: 'cost' | 'totalTokens' | 'inputTokens' | 'outputTokens';
  /** Usage the limit was compared with: recorded + reserved + this step's estimate. A limit is reached when this is `>=` it. */
  usage: number;
  limit: number;
  /** Cost unit (`'USD'`) or `'tokens'`. */
  unit: string;
  threshold: 'soft' | 'hard';
  /** `'request'`, or `'policy:<name>'` for a budget stored on the project. */
  source: string;
  /** Why the finding is not a plain comparison, e.g. usage in a cost unit with no rate to the limit's. */
  reason?: string;
}

/** Recorded and reserved usage of one scope in one window. */
export interface GuardScopeUsage {
  scope: GuardScope;
  window: GuardWindow | null;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  estimatedCost: number;
  /** `null` when there is no priced usage yet (or several units). */
  costUnit: string | null;
  reservedCost: number;
  reservedInputTokens: number;
  reservedOutputTokens: number;
  unpricedEvents: number;
  /** Recorded cost per cost unit, never summed across units. */
  costByUnit: Record<string, number>;
  /** Reserved cost per cost unit. */
  reservedCostByUnit: Record<string, number>;
}

/** What the step's estimate costs, and how Tollgate priced it. */
export interface GuardEstimateView {
  /** In `costUnit`; `null` when the step could not be priced (no price, no fallback rate). */
  cost: number | null;
  costUnit: string | null;
  priced: boolean;
  /** The catalog or override price used, when priced. */
  priceId?: string;
  /** Set when the project's fallback rate for unpriced models was used. */
  fallback?: 'project';
  /** The input tokens the guard holds: the estimate's, times the margin learned for this model. */
  inputTokens: number;
  outputTokens: number;
  /** Actual ÷ estimated input tokens assumed for this provider and model (>= 1). */
  inputTokensMargin: number;
}

/** Response body of `POST /v1/guard/check`. */
export interface GuardCheckResponse {
  decision: 'allow' | 'deny';
  /**
   * Set when the decision was taken without evaluating the budgets:
   * - `'busy'` (with `decision: 'deny'`): too many checks are queued on one of the step's scopes;
   *   nothing was reserved. Not an outage: send the same request again after `retryAfterMs`.
   *   The SDK does so itself, and so does the cost guard, for clients that do not.
   * - otherwise the guard could not be reached and the request's `failMode` was applied (by the
   *   service, or by the SDK for a service it could not reach); the text says why.
   */
  reason?: string;
  /** With `reason: 'busy'`: milliseconds after which a retry is likely to be served. */
  retryAfterMs?: number;
  violations: GuardFinding[];
  warnings: GuardFinding[];
  /** Limits the guard could not evaluate (a scope id missing from the context). */
  skipped: Array<{ scope: GuardScope; reason: string }>;
  /** Keyed by {@link usageKey}: `'resource:abc@7d'`, or `'run:<id>'`. */
  usage: Record<string, GuardScopeUsage>;
  reservation?: {
    id: string;
    estimatedCost: number;
    costUnit: string | null;
    inputTokens: number;
    outputTokens: number;
    expiresAt: string;
  };
  /** Present whenever the request had an estimate, dry runs included. */
  estimate?: GuardEstimateView;
  /** On an `allow` that holds only if the step's output is capped at `adjust.maxOutputTokens` (`onExceed: 'shrink'`). */
  adjust?: GuardAdjust;
  asOf: string;
}

/** Per-call settings the processors pass to `guard.check`; a client may ignore them. */
export interface GuardCheckCallOptions {
  /**
   * What is left of the processor's own deadline for busy answers, in ms. A client that retries
   * busy answers itself (the SDK does) stops at it, so the two retry loops do not add up.
   */
  busyDeadlineMs?: number;
}

/** Usage of one LLM step, as `client.events.record` takes it. */
export interface StepUsageEvent {
  /** Deterministic per step so a retried record is deduplicated. */
  eventId: string;
  occurredAt: string;
  traceId: string;
  runId?: string;
  threadId?: string;
  resourceId?: string;
  userId?: string;
  organizationId?: string;
  sessionId?: string;
  entityType: string;
  entityName?: string;
  provider: string;
  model: string;
  /** Tollgate's meaning: input includes cache reads and writes, output includes reasoning; breakdowns are parts. */
  usage: UsageCounts;
  /** Settles this reservation: the held estimate is replaced by the actual usage. */
  reservationId?: string;
  stepIndex?: number;
}

/** The Tollgate client surface the processors call; `TollgateClient` from `@tollgate/sdk` is one. */
export interface TollgateGuardClient {
  guard: {
    /** May answer `reason: 'busy'` (see {@link GuardCheckResponse.reason}); the cost guard then retries. */
    check(request: GuardCheckRequest, options?: GuardCheckCallOptions): Promise<GuardCheckResponse>;
    /** Frees a reservation the step did not use. Optional: without it, an unused reservation expires. */
    release?(reservationId: string): Promise<unknown>;
  };
  events: {
    /**
     * May send at once (a returned promise is awaited), or buffer, as the SDK does: a client with
     * `flush` must then deliver on its own too (the SDK sends a batch within `flushIntervalMs`).
     */
    record(event: StepUsageEvent): unknown;
    /**
     * Delivers what `record` buffered. The cost guard calls it when it needs a run's usage stored:
     * before the run's last step resolves, before a denial, before asking again about a check that
     * would deny or shrink while the run's records were not stored yet, and on an API error;
     * between steps it leaves delivery to the client.
     */
    flush?(): Promise<unknown>;
  };
}

/** The key of a scope's entry in {@link GuardCheckResponse.usage}. */
export function usageKey(scope: GuardScope, id: string, window: GuardWindow | undefined): string {
  return scope === 'run' ? `run:${id}` : `${scope}:${id}@${window ?? '7d'}`;
}
