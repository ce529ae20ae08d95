import { z } from 'zod';

/** Largest token count accepted for one step: far above any model's context, far below 2^53. */
export const MAX_TOKENS = 100_000_000;
export const MAX_ID_LENGTH = 256;
export const MAX_LABELS = 64;
export const MAX_TAGS = 64;
/** No event before this instant is accepted (it is a typo, not history). */
export const EARLIEST_OCCURRED_AT = Date.UTC(2000, 0, 1);

// Ids are opaque, bounded, printable: control characters break logs and exports downstream.
const noControl = /^[^\p{Cc}\p{Cs}]*$/u;
export const idSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_ID_LENGTH, `must be at most ${MAX_ID_LENGTH} characters`)
  .regex(noControl, 'must not contain control characters');

/**
 * Event ids the service writes itself (reservation life cycle, guard audit) start with this; a
 * client's event id may not, so no client event can take the place of a system event.
 */
export const SYSTEM_EVENT_ID_PREFIX = 'tg:';

/** A bounded, printable text (no control characters). */
export const shortText = (max: number) =>
  z
    .string()
    .min(1, 'must not be empty')
    .max(max, `must be at most ${max} characters`)
    .regex(noControl, 'must not contain control characters');

const tokens = z
  .number({ error: 'must be a number' })
  .int('must be an integer')
  .min(0, 'must not be negative')
  .max(MAX_TOKENS, `must be at most ${MAX_TOKENS}`);

const isoTimestamp = z.iso
  .datetime({ offset: true, precision: undefined, message: 'must be an ISO-8601 timestamp with a time zone' })
  .refine(
    (s) => !Number.isNaN(Date.parse(s)) && Date.parse(s) >= EARLIEST_OCCURRED_AT,
    'must be a valid instant after 2000-01-01',
  );

/**
 * Token usage of one step. Input tokens include cache reads and writes; output tokens include
 * reasoning tokens. The breakdown fields are subsets, never added on top.
 */
export const usageSchema = z
  .strictObject({
    inputTokens: tokens,
    outputTokens: tokens,
    cacheReadTokens: tokens.optional(),
    cacheWriteTokens: tokens.optional(),
    /** The part of `cacheWriteTokens` written with a 1-hour time to live (dearer than 5 minutes, where a provider prices them apart). */
    cacheWrite1hTokens: tokens.optional(),
    reasoningTokens: tokens.optional(),
    audioInputTokens: tokens.optional(),
    imageInputTokens: tokens.optional(),
  })
  .superRefine((u, ctx) => {
    const parts = [
      ['cacheReadTokens', 'inputTokens'],
      ['cacheWriteTokens', 'inputTokens'],
      ['audioInputTokens', 'inputTokens'],
      ['imageInputTokens', 'inputTokens'],
      ['reasoningTokens', 'outputTokens'],
      ['cacheWrite1hTokens', 'cacheWriteTokens'],
    ] as const;
    let ok = true;
    for (const [part, total] of parts) {
      if ((u[part] ?? 0) > (u[total] ?? 0)) {
        ok = false;
        ctx.addIssue({
          code: 'custom',
          path: [part],
          message: `must not exceed ${total} (it is a part of it, not added on top)`,
        });
      }
    }
    if (ok && (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0) > u.inputTokens) {
      ctx.addIssue({
        code: 'custom',
        path: ['cacheWriteTokens'],
        message: 'cacheReadTokens + cacheWriteTokens must not exceed inputTokens',
      });
    }
  });

export const costSchema = z.strictObject({
  amount: z
    .number({ error: 'must be a number' })
    .finite('must be finite')
    .min(0, 'must not be negative')
    .max(1_000_000, 'must be at most 1000000'),
  currency: z
    .string()
    .regex(/^[A-Z]{3}$/, 'must be a three-letter currency code such as USD')
    .default('USD'),
  source: shortText(64).optional(),
});

export const labelsSchema = z
  .record(
    z
      .string()
      .min(1, 'label keys must not be empty')
      .max(128, 'label keys must be at most 128 characters')
      .regex(noControl, 'label keys must not contain control characters'),
    z.string().max(1024, 'must be at most 1024 characters').regex(noControl, 'must not contain control characters'),
  )
  .refine((l) => Object.keys(l).length <= MAX_LABELS, `must have at most ${MAX_LABELS} labels`);

/** The provider usage shapes the service reads (libs/contracts/src/usage/provider-usage.ts). */
export const PROVIDER_USAGE_FORMATS = ['openai', 'anthropic', 'gemini', 'bedrock', 'ai-sdk'] as const;
export type ProviderUsageFormat = (typeof PROVIDER_USAGE_FORMATS)[number];

const MAX_RAW_KEYS = 200;
const MAX_RAW_DEPTH = 4;
/** A key that names a token count in any provider's usage (`input_tokens`, `promptTokenCount`, `inputTokens`, …). */
const COUNT_KEY = /tokens?$|tokencount$|token_count$/i;

/**
 * A provider's usage object as its API (or the AI SDK) returned it: JSON, bounded, every number
 * finite and non-negative, and a count never a string — a count the normalizer could not read
 * would otherwise be counted as 0, which a ledger must refuse rather than guess.
 */
const rawUsageObject = z.record(z.string(), z.unknown(), { error: 'must be an object' }).superRefine((value, ctx) => {
  let keys = 0;
  const walk = (v: unknown, path: (string | number)[], depth: number): boolean => {
    if (v === null || typeof v === 'boolean') return true;
    const key = path[path.length - 1];
    if (typeof v === 'number') {
      if (Number.isFinite(v) && v >= 0) return true;
      ctx.addIssue({ code: 'custom', path, message: 'must be a finite number, not negative' });
      return false;
    }
    if (typeof v === 'string') {
      if (typeof key === 'string' && COUNT_KEY.test(key))
        ctx.addIssue({ code: 'custom', path, message: 'is a token count: must be a number' });
      else if (v.length > 256 || /[\u0000\uD800-\uDFFF]/.test(v))
        ctx.addIssue({ code: 'custom', path, message: 'must be a printable text of at most 256 characters' });
      else return true;
      return false;
    }
    if (typeof v !== 'object' || depth >= MAX_RAW_DEPTH) {
      ctx.addIssue({
        code: 'custom',
        path,
        message: depth >= MAX_RAW_DEPTH ? `must be nested at most ${MAX_RAW_DEPTH} levels deep` : 'must be JSON',
      });
      return false;
    }
    const entries = Array.isArray(v) ? v.map((x, i) => [i, x] as const) : Object.entries(v);
    keys += entries.length;
    if (keys > MAX_RAW_KEYS) {
      ctx.addIssue({ code: 'custom', path, message: `must hold at most ${MAX_RAW_KEYS} fields in all` });
      return false;
    }
    return entries.every(([k, x]) => walk(x, [...path, k], depth + 1));
  };
  walk(value, [], 0);
});

/**
 * The provider's own usage, for a caller that would rather not translate it: the service reads it
 * the way the provider means it (libs/contracts/src/usage/normalize-usage.ts) into `usage`.
 */
export const providerUsageSchema = z.strictObject({
  format: z.enum(PROVIDER_USAGE_FORMATS, { error: `must be one of ${PROVIDER_USAGE_FORMATS.join(', ')}` }),
  /** OpenAI chat or Responses `usage`, Anthropic `usage`, Gemini `usageMetadata`, Bedrock Converse `usage`, or the AI SDK's step usage. */
  usage: rawUsageObject,
  /** ai-sdk only: the step's providerMetadata (where AI SDK 5 Anthropic and Bedrock models put their cache writes). */
  providerMetadata: rawUsageObject.optional(),
  /** ai-sdk only: the model's specificationVersion, when the usage's shape does not tell. */
  specVersion: z.enum(['v2', 'v3'], { error: 'must be v2 or v3' }).optional(),
});
export type ProviderUsage = z.infer<typeof providerUsageSchema>;

/** One LLM step, as an agent reports it. Aligned with the OpenTelemetry GenAI conventions. */
const stepUsageEventFields = z.strictObject({
  eventId: idSchema.refine(
    (id) => !id.startsWith(SYSTEM_EVENT_ID_PREFIX),
    `must not start with ${SYSTEM_EVENT_ID_PREFIX} (reserved for the service's own events)`,
  ),
  occurredAt: isoTimestamp,
  traceId: idSchema,
  spanId: idSchema.optional(),
  runId: idSchema.optional(),
  threadId: idSchema.optional(),
  resourceId: idSchema.optional(),
  userId: idSchema.optional(),
  organizationId: idSchema.optional(),
  sessionId: idSchema.optional(),
  entityType: shortText(64),
  entityName: idSchema.optional(),
  provider: shortText(128),
  model: shortText(256),
  /** Tollgate's usage; or send `providerUsage` instead. */
  usage: usageSchema.optional(),
  providerUsage: providerUsageSchema.optional(),
  cost: costSchema.optional(),
  durationMs: z
    .number({ error: 'must be a number' })
    .finite('must be finite')
    .min(0, 'must not be negative')
    .max(7 * 24 * 3600 * 1000, 'must be at most 7 days')
    .optional(),
  finishReason: shortText(64).optional(),
  stepIndex: z
    .number({ error: 'must be a number' })
    .int('must be an integer')
    .min(0, 'must not be negative')
    .max(100_000, 'must be at most 100000')
    .optional(),
  reservationId: idSchema.optional(),
  labels: labelsSchema.optional(),
  tags: z.array(shortText(128)).max(MAX_TAGS, `must have at most ${MAX_TAGS} tags`).optional(),
  environment: shortText(128).optional(),
  serviceName: shortText(128).optional(),
});

/** A step event carries its usage in Tollgate's terms (`usage`) or in its provider's (`providerUsage`): one of them. */
export const stepUsageEventSchema = stepUsageEventFields.superRefine((e, ctx) => {
  if (e.usage && e.providerUsage)
    ctx.addIssue({ code: 'custom', path: ['providerUsage'], message: 'must not be sent with usage: send one of them' });
  if (!e.usage && !e.providerUsage)
    ctx.addIssue({
      code: 'custom',
      path: ['usage'],
      message: 'is required (or providerUsage: the provider’s usage object and its format)',
    });
});

/** A parsed step event; its `usage` is filled from `providerUsage` by `withProviderUsageRead`. */
export type ParsedStepUsageEvent = z.infer<typeof stepUsageEventSchema>;
/** A step event as the service stores it: always with Tollgate's usage. */
export type StepUsageEvent = Omit<ParsedStepUsageEvent, 'usage'> & { usage: Usage };
export type StepUsageEventInput = z.input<typeof stepUsageEventSchema>;
export type Usage = z.infer<typeof usageSchema>;

export const MAX_EVENTS_PER_BATCH = 1000;

/** The envelope is checked first; each event is then checked on its own so one bad event does not sink the batch. */
export const ingestRequestSchema = z.strictObject({
  events: z
    .array(z.unknown(), { error: 'must be an array of step events' })
    .min(1, 'must hold at least one event')
    .max(MAX_EVENTS_PER_BATCH, `must hold at most ${MAX_EVENTS_PER_BATCH} events`),
});

export type IngestResult =
  | {
      index: number;
      eventId: string;
      status: 'accepted';
      position: string;
      /** Set when this event settled a reservation with more than was reserved. */
      reservationExceeded?: ReservationExceededView;
    }
  | { index: number; eventId: string; status: 'duplicate' }
  | { index: number; eventId: string | null; status: 'rejected'; field: string; reason: string };

/** A settlement whose actual usage passed its reservation (also logged as `ReservationExceeded`). */
export interface ReservationExceededView {
  reservationId: string;
  reserved: { cost: number; costUnit: string | null; inputTokens: number; outputTokens: number };
  actual: { cost: number | null; costUnit: string | null; inputTokens: number; outputTokens: number };
}

export interface IngestResponse {
  accepted: number;
  duplicates: number;
  rejected: number;
  results: IngestResult[];
}

const exceededAmounts = (cost: z.ZodType) =>
  z.strictObject({
    cost,
    costUnit: z.string().nullable(),
    inputTokens: z.number(),
    outputTokens: z.number(),
  });

/** What `POST /v1/events` answers (the OpenAPI document's response schema). */
export const ingestResponseSchema = z.strictObject({
  accepted: z.number().describe('Events stored by this request'),
  duplicates: z.number().describe('Events whose eventId was already stored (nothing changed)'),
  rejected: z.number().describe('Events refused; the other events of the batch are stored all the same'),
  results: z
    .array(
      z.discriminatedUnion('status', [
        z.strictObject({
          index: z.number().describe('The position of the event in the request'),
          eventId: z.string(),
          status: z.literal('accepted'),
          position: z.string().describe('The event position in the project log'),
          reservationExceeded: z
            .strictObject({
              reservationId: z.string(),
              reserved: exceededAmounts(z.number()),
              actual: exceededAmounts(z.number().nullable()),
            })
            .optional()
            .describe('Set when this event settled a reservation with more than was reserved'),
        }),
        z.strictObject({ index: z.number(), eventId: z.string(), status: z.literal('duplicate') }),
        z.strictObject({
          index: z.number(),
          eventId: z.string().nullable().describe('null when the event had no valid eventId'),
          status: z.literal('rejected'),
          field: z.string().describe('The field at fault, e.g. usage.inputTokens'),
          reason: z.string(),
        }),
      ]),
    )
    .describe('One result per event, in request order'),
});
