import { z } from 'zod';
import { SCOPES, type Scope } from './scopes';
import { idSchema, shortText } from './step-event';

// The scopes are defined with their context fields and columns (scopes.ts); the SDK imports them from here.
export { SCOPES, type Scope };

/** `<scope>:<id>` (a query's scopeKey), its id checked as a context id: the routes look it up as one. */
export const scopeKeySchema = z
  .string({ error: 'must look like resource:<id>' })
  .regex(new RegExp(`^(${SCOPES.join('|')}):.+$`, 's'), 'must look like resource:<id>')
  .superRefine((key, ctx) => {
    const id = idSchema.safeParse(key.slice(key.indexOf(':') + 1));
    if (!id.success) ctx.addIssue({ code: 'custom', message: `id (after the colon) ${id.error.issues[0].message}` });
  });

export const WINDOWS = ['1h', '6h', '24h', '7d', '30d', '365d'] as const;
export type Window = (typeof WINDOWS)[number];

export const WINDOW_MS: Record<Window, number> = {
  '1h': 3600_000,
  '6h': 6 * 3600_000,
  '24h': 24 * 3600_000,
  '7d': 7 * 24 * 3600_000,
  '30d': 30 * 24 * 3600_000,
  '365d': 365 * 24 * 3600_000,
};

export const LIMIT_TYPES = ['cost', 'totalTokens', 'inputTokens', 'outputTokens'] as const;
export type LimitType = (typeof LIMIT_TYPES)[number];

// Bounded so that a limit in micro-units always fits a bigint column.
const amount = z
  .number({ error: 'must be a number' })
  .finite('must be finite')
  .positive('must be positive')
  .max(1e9, 'must be at most 1000000000');
/** A cost unit: a three-letter currency code such as USD (the same rule as an event's cost). */
export const costUnitSchema = z.string().regex(/^[A-Z]{3}$/, 'must be a three-letter currency code such as USD');

const tokenLimit = z
  .number({ error: 'must be a number' })
  .int('must be an integer')
  .positive('must be positive')
  .max(1e15, 'must be at most 1e15');

/** The step's ids; `runId` stands for the trace when no traceId is given. */
export const guardContextSchema = z.strictObject({
  traceId: idSchema.optional(),
  runId: idSchema.optional(),
  threadId: idSchema.optional(),
  resourceId: idSchema.optional(),
  userId: idSchema.optional(),
  organizationId: idSchema.optional(),
  sessionId: idSchema.optional(),
  entityType: idSchema.optional(),
  entityName: idSchema.optional(),
});
export type GuardContext = z.infer<typeof guardContextSchema>;

/** A budget's scope, window and amounts: the same fields in a request's limits and in a policy. */
const budgetFields = {
  scope: z.enum(SCOPES),
  /** Rolling window; ignored for the run scope (a run is bounded by itself). */
  window: z.enum(WINDOWS).default('7d'),
  maxCost: amount.optional(),
  /** The unit of maxCost; the project's cost unit (USD unless set) when not given. */
  costUnit: costUnitSchema.optional(),
  maxTotalTokens: tokenLimit.optional(),
  maxInputTokens: tokenLimit.optional(),
  maxOutputTokens: tokenLimit.optional(),
  /** Warn (soft threshold) once usage reaches this percentage of a limit. */
  warnAtPercent: z
    .number({ error: 'must be a number' })
    .gt(0, 'must be above 0')
    .lt(100, 'must be below 100')
    .optional(),
};

/** Budget alerts: thresholds in percent of each limit, each crossed once (BudgetThresholdCrossed). */
const alertFields = {
  alerts: z
    .array(
      z
        .number({ error: 'must be a number' })
        .finite('must be finite')
        .gt(0, 'must be above 0')
        .max(1000, 'must be at most 1000'),
    )
    .max(10, 'must hold at most 10 thresholds')
    .refine((a) => new Set(a).size === a.length, 'must not repeat a threshold')
    .optional(),
  /** Points a rolling window's usage must fall below a threshold before it alerts again (default 5). */
  alertHysteresis: z
    .number({ error: 'must be a number' })
    .min(0, 'must not be negative')
    .max(100, 'must be at most 100')
    .optional(),
};
/** Points below a threshold a rolling window must fall before the threshold alerts again, unless a policy says. */
export const DEFAULT_ALERT_HYSTERESIS = 5;

const hasAnAmount = [
  (l: { maxCost?: number; maxTotalTokens?: number; maxInputTokens?: number; maxOutputTokens?: number }) =>
    l.maxCost !== undefined ||
    l.maxTotalTokens !== undefined ||
    l.maxInputTokens !== undefined ||
    l.maxOutputTokens !== undefined,
  { message: 'must set at least one of maxCost, maxTotalTokens, maxInputTokens, maxOutputTokens' },
] as const;

export const guardLimitSchema = z.strictObject({ ...budgetFields, ...alertFields }).refine(...hasAnAmount);
export type GuardLimit = z.infer<typeof guardLimitSchema>;

export const guardEstimateSchema = z.strictObject({
  provider: shortText(128),
  model: shortText(256),
  inputTokens: z
    .number({ error: 'must be a number' })
    .int('must be an integer')
    .min(0, 'must not be negative')
    .max(100_000_000),
  maxOutputTokens: z
    .number({ error: 'must be a number' })
    .int('must be an integer')
    .min(0, 'must not be negative')
    .max(100_000_000),
});
export type GuardEstimate = z.infer<typeof guardEstimateSchema>;

/** `POST /v1/estimate`: what a step would cost, before making it. */
export const estimateRequestSchema = z
  .strictObject({
    provider: shortText(128),
    model: shortText(256),
    /** The step's input tokens, when the caller counted them… */
    inputTokens: z
      .number({ error: 'must be a number' })
      .int('must be an integer')
      .min(0, 'must not be negative')
      .max(100_000_000)
      .optional(),
    /** …or its messages, counted here with o200k (the margin for the provider's own tokenizer is applied on top). */
    messages: z
      .array(
        z.strictObject({
          role: shortText(64),
          content: z.string().max(4_000_000, 'must be at most 4000000 characters'),
        }),
      )
      .min(1, 'must hold at least one message')
      .max(10_000, 'must hold at most 10000 messages')
      .optional(),
    maxOutputTokens: z
      .number({ error: 'must be a number' })
      .int('must be an integer')
      .min(0, 'must not be negative')
      .max(100_000_000),
  })
  .superRefine((r, ctx) => {
    if ((r.inputTokens === undefined) === (r.messages === undefined))
      ctx.addIssue({ code: 'custom', path: ['inputTokens'], message: 'give exactly one of inputTokens and messages' });
  });
export type EstimateRequest = z.infer<typeof estimateRequestSchema>;

/** What `POST /v1/estimate` answers: the step's cost as the guard would reserve it. */
export interface EstimateResponse extends GuardEstimateView {
  provider: string;
  model: string;
  /** The input tokens before the margin: as given, or as counted. */
  countedInputTokens: number;
  counted: 'given' | 'o200k';
  /**
   * For a catalog price with tiers (long-context surcharges): the input-token count the applied
   * tier starts above, 0 for the base tier. Null when the price has no tiers (or is not the catalog's).
   */
  tier: { inputTokensAbove: number } | null;
}

/** What the guard does with a step that does not fit: deny it, or let it run with fewer output tokens. */
export const ON_EXCEED = ['block', 'shrink'] as const;
export type OnExceed = (typeof ON_EXCEED)[number];
const onExceedSchema = z.enum(ON_EXCEED, { error: "must be 'block' or 'shrink'" });

export const guardCheckRequestSchema = z
  .strictObject({
    context: guardContextSchema,
    limits: z.array(guardLimitSchema).max(50, 'must hold at most 50 limits').optional(),
    estimate: guardEstimateSchema.optional(),
    /** Reserve the estimate when the step fits; needs `estimate` and `stepId`. */
    reserve: z.boolean().default(false),
    /** The caller's id for the step, so a retried check reuses its reservation. */
    stepId: idSchema.optional(),
    failMode: z.enum(['open', 'closed']).default('open'),
    dryRun: z.boolean().default(false),
    /**
     * A check made ahead of its step (while the step before it runs its tools): it reserves only
     * when the step fits with nothing to report (no denial, no warning, no adjustment). Otherwise
     * nothing is reserved or logged and the answer is `decision: 'deny'`, `reason: 'tentative'`,
     * with what the check found; the caller then sends the step's own check. Needs `reserve`.
     */
    // No default: a client fills the schema's defaults in, and a service older than this field refuses it.
    tentative: z.boolean().optional(),
    /**
     * For the request's limits, and the policies that set none: `shrink` lets a step that does not
     * fit run with fewer output tokens (the answer's `adjust`), which the caller then applies.
     */
    onExceed: onExceedSchema.optional(),
    /**
     * The fewest output tokens a shrunk step may have (default 1). Giving it says the caller can
     * apply an `adjust`, so a policy with `onExceed: 'shrink'` may shrink the step too.
     */
    minOutputTokens: z
      .number({ error: 'must be a number' })
      .int('must be an integer')
      .min(1, 'must be at least 1')
      .max(100_000_000)
      .optional(),
  })
  .superRefine((r, ctx) => {
    if (r.reserve && !r.estimate)
      ctx.addIssue({ code: 'custom', path: ['estimate'], message: 'is required when reserve is true' });
    if (r.reserve && !r.stepId)
      ctx.addIssue({ code: 'custom', path: ['stepId'], message: 'is required when reserve is true' });
    if (r.tentative && (!r.reserve || r.dryRun))
      ctx.addIssue({ code: 'custom', path: ['tentative'], message: 'needs reserve: true, and no dryRun' });
    if (r.onExceed === 'shrink' && !r.estimate)
      ctx.addIssue({ code: 'custom', path: ['estimate'], message: "is required when onExceed is 'shrink'" });
    if (r.minOutputTokens !== undefined && !r.estimate)
      ctx.addIssue({ code: 'custom', path: ['estimate'], message: 'is required with minOutputTokens' });
    if (r.minOutputTokens !== undefined && r.estimate && r.minOutputTokens > r.estimate.maxOutputTokens) {
      ctx.addIssue({ code: 'custom', path: ['minOutputTokens'], message: 'must be at most estimate.maxOutputTokens' });
    }
  });
export type GuardCheckRequest = z.infer<typeof guardCheckRequestSchema>;
export type GuardCheckRequestInput = z.input<typeof guardCheckRequestSchema>;

export interface GuardFinding {
  scope: Scope;
  scopeKey: string;
  window: Window | null;
  limitType: LimitType;
  usage: number;
  limit: number;
  unit: string;
  threshold: 'soft' | 'hard';
  /** Where the limit came from: the request, or a project policy by name. */
  source: string;
  /** Why a finding is not a plain comparison, e.g. usage in a unit with no rate to the limit's. */
  reason?: string;
}

/** What the step's estimate costs, and how it was priced. */
export interface GuardEstimateView {
  /** In `costUnit`; null when the step could not be priced (no price, no fallback). */
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
  /** Actual ÷ estimated input tokens assumed for this provider and model (≥ 1). */
  inputTokensMargin: number;
}

export interface ScopeUsage {
  scope: Scope;
  window: Window | null;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  estimatedCost: number;
  costUnit: string | null;
  reservedCost: number;
  reservedInputTokens: number;
  reservedOutputTokens: number;
  unpricedEvents: number;
  /** Recorded cost per unit, never summed across units. */
  costByUnit: Record<string, number>;
  /** Reserved cost per unit. */
  reservedCostByUnit: Record<string, number>;
  /** A windowed budget's burn rate and when its limits are reached at it; null for a run. */
  forecast?: UsageForecast | null;
}

/** A windowed budget's burn rate over the last hour of its window, and when its limits are reached at that rate. */
export interface UsageForecast {
  /** Committed usage of the last hour, per hour; cost in `costUnit` (null: no priced usage). */
  burnRate: { cost: number; costUnit: string | null; totalTokens: number; inputTokens: number; outputTokens: number };
  /**
   * Per limit on this usage: when usage (committed and reserved) reaches it at the burn rate —
   * `asOf` when it already has, null when the rate is 0 or the limit is more than one window
   * length away at that rate.
   */
  limits: { source: string; limitType: LimitType; limit: number; unit: string; reachedAt: string | null }[];
  /** The earliest `reachedAt` (null when no limit is reached). */
  limitReachedAt: string | null;
}

/** How a step that did not fit was let run: with at most `maxOutputTokens` output tokens. */
export interface GuardAdjust {
  /** The most output tokens that fit every limit (at least the request's `minOutputTokens`). The reservation holds this many. */
  maxOutputTokens: number;
  /** The request's `estimate.maxOutputTokens`. */
  requestedMaxOutputTokens: number;
  /** What the step would have been denied for at its full size (empty on a retried check). */
  limitedBy: GuardFinding[];
}

export interface GuardCheckResponse {
  decision: 'allow' | 'deny';
  /**
   * Set when the decision was taken without evaluating the budgets:
   * - `'busy'`: too many checks are queued on one of the step's scopes; nothing was reserved or
   *   logged. Retry after `retryAfterMs` (the SDK and the processors do, with jitter).
   * - `'guard unavailable (…); failMode …'`: the database could not be reached; the caller's
   *   `failMode` decided.
   */
  reason?: string;
  /** With `reason: 'busy'`: when a retry is likely to be served. */
  retryAfterMs?: number;
  violations: GuardFinding[];
  warnings: GuardFinding[];
  skipped: { scope: Scope; reason: string }[];
  /** Keyed `<scopeKey>@<window>`, e.g. `resource:abc@7d`, or `run:<id>` for runs. */
  usage: Record<string, ScopeUsage>;
  reservation?: {
    id: string;
    estimatedCost: number;
    costUnit: string | null;
    inputTokens: number;
    outputTokens: number;
    expiresAt: string;
  };
  /** Present whenever the request had an estimate, dry runs included (shrunk when `adjust` is). */
  estimate?: GuardEstimateView;
  /**
   * Set on an `allow` that holds only if the step runs with fewer output tokens (`onExceed:
   * 'shrink'`): the caller must cap the step's output at `adjust.maxOutputTokens`.
   */
  adjust?: GuardAdjust;
  asOf: string;
}

export const policySchema = z
  .strictObject({
    ...budgetFields,
    strategy: z.enum(['block', 'warn']).default('block'),
    /**
     * A step this policy would block: `block` denies it whatever the request asks; `shrink` lets it
     * run with fewer output tokens when the caller can (it sent `onExceed: 'shrink'` or a
     * `minOutputTokens`).
     * Not set: as the request's `onExceed` says.
     */
    onExceed: onExceedSchema.optional(),
    /** Apply only to steps of this entity (agent) name. */
    entityName: idSchema.optional(),
    ...alertFields,
  })
  .refine(...hasAnAmount);
export type Policy = z.infer<typeof policySchema>;

// ---- Response schemas (the OpenAPI document's; test/e2e/openapi-responses.spec.ts parses real answers with them) ----

const scopeEnum = z.enum(SCOPES);
const windowOrNull = z.enum(WINDOWS).nullable().describe('The rolling window; null for a run (bounded by itself)');
const unitOrNull = z.string().nullable().describe('Three-letter currency code; null when nothing was priced');

export const guardFindingResponse = z.strictObject({
  scope: scopeEnum,
  scopeKey: z.string().describe('`<scope>:<id>`'),
  window: windowOrNull,
  limitType: z.enum(LIMIT_TYPES),
  usage: z.number().describe('Committed plus reserved usage, with this step, in the unit of the limit'),
  limit: z.number(),
  unit: z.string().describe('The limit unit: a currency code, or tokens'),
  threshold: z.enum(['soft', 'hard']).describe('soft: past warnAtPercent (a warning); hard: past the limit'),
  source: z.string().describe("Where the limit came from: 'request', or 'policy:<name>'"),
  reason: z.string().optional().describe('Why the finding is not a plain comparison, e.g. a unit with no rate'),
});

export const guardEstimateViewResponse = z.strictObject({
  cost: z.number().nullable().describe('In costUnit; null when the step could not be priced'),
  costUnit: unitOrNull,
  priced: z.boolean(),
  priceId: z.string().optional().describe('The catalog or override price used, when priced'),
  fallback: z.literal('project').optional().describe("Set when the project's fallback rate was used"),
  inputTokens: z.number().describe("The input tokens held: the estimate's, times the margin"),
  outputTokens: z.number(),
  inputTokensMargin: z.number().describe('Actual ÷ estimated input tokens assumed for this model (≥ 1)'),
});

const forecastResponse = z.strictObject({
  burnRate: z
    .strictObject({
      cost: z.number(),
      costUnit: unitOrNull,
      totalTokens: z.number(),
      inputTokens: z.number(),
      outputTokens: z.number(),
    })
    .describe('Committed usage of the last hour, per hour'),
  limits: z.array(
    z.strictObject({
      source: z.string(),
      limitType: z.enum(LIMIT_TYPES),
      limit: z.number(),
      unit: z.string(),
      reachedAt: z
        .string()
        .nullable()
        .describe('When usage reaches the limit at the burn rate (ISO 8601); null: not within a window'),
    }),
  ),
  limitReachedAt: z.string().nullable().describe('The earliest reachedAt'),
});

export const scopeUsageResponse = z.strictObject({
  scope: scopeEnum,
  window: windowOrNull,
  inputTokens: z.number(),
  outputTokens: z.number(),
  totalTokens: z.number(),
  estimatedCost: z.number().describe('Recorded cost in costUnit'),
  costUnit: unitOrNull,
  reservedCost: z.number().describe('Cost held by open reservations, in costUnit'),
  reservedInputTokens: z.number(),
  reservedOutputTokens: z.number(),
  unpricedEvents: z.number().describe('Recorded steps with no price (their tokens count, their cost does not)'),
  costByUnit: z.record(z.string(), z.number()).describe('Recorded cost per unit, never summed across units'),
  reservedCostByUnit: z.record(z.string(), z.number()).describe('Reserved cost per unit'),
  forecast: forecastResponse
    .nullable()
    .optional()
    .describe("A windowed budget's burn rate and when its limits are reached at it; null for a run"),
});

export const guardCheckResponseSchema = z.strictObject({
  decision: z.enum(['allow', 'deny']),
  reason: z
    .string()
    .optional()
    .describe(
      "Set when the budgets were not evaluated: 'busy' (retry after retryAfterMs) or guard unavailable; or 'tentative': a tentative check that did not fit with nothing to report (nothing reserved or logged)",
    ),
  retryAfterMs: z.number().optional().describe("With reason 'busy': when a retry is likely to be served"),
  violations: z.array(guardFindingResponse).describe('Hard limits this step would pass'),
  warnings: z.array(guardFindingResponse).describe('Soft thresholds passed, and warn-strategy limits'),
  skipped: z
    .array(z.strictObject({ scope: scopeEnum, reason: z.string() }))
    .describe('Scopes with limits that the context did not identify'),
  usage: z
    .record(z.string(), scopeUsageResponse)
    .describe('Keyed `<scopeKey>@<window>`, e.g. `resource:abc@7d`, or `run:<id>` for runs'),
  reservation: z
    .strictObject({
      id: z.string().describe('Settle it with the step event (reservationId) or release it'),
      estimatedCost: z.number(),
      costUnit: unitOrNull,
      inputTokens: z.number(),
      outputTokens: z.number(),
      expiresAt: z.string().describe('ISO 8601; an unsettled reservation lapses then'),
    })
    .optional()
    .describe('Set when reserve was asked and the step fits'),
  estimate: guardEstimateViewResponse.optional().describe('Present whenever the request had an estimate'),
  adjust: z
    .strictObject({
      maxOutputTokens: z
        .number()
        .describe('The most output tokens that fit every limit; the reservation holds this many'),
      requestedMaxOutputTokens: z.number(),
      limitedBy: z.array(guardFindingResponse).describe('What the full-size step would have been denied for'),
    })
    .optional()
    .describe("On an allow that holds only with fewer output tokens (onExceed 'shrink'): cap the output at it"),
  asOf: z.string().describe('ISO 8601: the time the usage was read'),
});

export const estimateResponseSchema = guardEstimateViewResponse.extend({
  provider: z.string(),
  model: z.string(),
  countedInputTokens: z.number().describe('The input tokens before the margin: as given, or as counted'),
  counted: z.enum(['given', 'o200k']).describe('given: the request had inputTokens; o200k: counted from messages'),
  tier: z
    .strictObject({ inputTokensAbove: z.number() })
    .nullable()
    .describe('The catalog price tier applied (0: the base tier); null when the price has no tiers'),
});
