/**
 * What the processors need from a Tollgate client: the `POST /v1/guard/check` call and step usage
 * recording. Structural, so the SDK client (`client.guard.check` returns the response body), a
 * fake, or a hand-written HTTP wrapper all fit.
 */

/** Scopes a limit can apply to. */
export type GuardScope = 'run' | 'thread' | 'resource' | 'user' | 'organization' | 'session';

/** Aggregation windows. Ignored for the `run` scope. */
export type GuardWindow = '1h' | '6h' | '24h' | '7d' | '30d' | '365d';

/** Ids that place a step in its scopes. */
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

/** A limit evaluated by the guard. */
export interface GuardLimit {
  scope: GuardScope;
  window?: GuardWindow;
  maxCost?: number;
  maxTotalTokens?: number;
  maxInputTokens?: number;
  maxOutputTokens?: number;
  /** Soft threshold, as a percentage of each max, that produces a warning. */
  warnAtPercent?: number;
}

/** Request body of `POST /v1/guard/check`. */
export interface GuardCheckRequest {
  context: GuardContext;
  limits?: GuardLimit[];
  /** The step about to run; with `reserve`, its worst-case cost is held until its usage is recorded. */
  estimate?: { provider: string; model: string; inputTokens: number; maxOutputTokens: number };
  reserve?: boolean;
  /** Idempotency key of the step: a retried check returns the same reservation. */
  stepId?: string;
  failMode?: 'open' | 'closed';
  /** Evaluate without reserving or recording anything. */
  dryRun?: boolean;
}

/** One limit crossed (violation) or approached (warning). */
export interface GuardFinding {
  scope: GuardScope;
  /** `'<scope>:<id>'`, e.g. `'resource:abc'`. */
  scopeKey: string;
  window?: GuardWindow;
  limitType: 'cost' | 'totalTokens' | 'inputTokens' | 'outputTokens';
  /** Usage the limit was compared with: recorded plus reserved plus this step's estimate. */
  usage: number;
  limit: number;
  /** Cost unit (`'USD'`) or `'tokens'`. */
  unit: string;
  threshold: 'soft' | 'hard';
}

/** Recorded and reserved usage of one scope key. */
export interface GuardScopeUsage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  estimatedCost: number;
  costUnit: string;
  reservedCost: number;
  reservedTokens: number;
}

/** Response body of `POST /v1/guard/check`. */
export interface GuardCheckResponse {
  decision: 'allow' | 'deny';
  violations: GuardFinding[];
  warnings: GuardFinding[];
  /** Limits the guard could not evaluate (for example a scope id it did not receive). */
  skipped: Array<{ scope: GuardScope; reason: string }>;
  usage: Record<string, GuardScopeUsage>;
  reservation?: { id: string; estimatedCost: number; inputTokens: number; outputTokens: number; expiresAt: string };
  asOf: string;
}

/** Usage of one LLM step, sent to `client.events.record`. */
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
  usage: { inputTokens: number; outputTokens: number; cacheReadTokens?: number; reasoningTokens?: number };
  /** Settles this reservation: the held estimate is replaced by the actual usage. */
  reservationId?: string;
  stepIndex?: number;
}

/** The Tollgate client surface the processors call. */
export interface TollgateGuardClient {
  guard: { check(request: GuardCheckRequest): Promise<GuardCheckResponse> };
  events: { record(event: StepUsageEvent): Promise<unknown> };
}
