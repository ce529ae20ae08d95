import { z } from 'zod';
import { isoInstantSchema, shortText } from '@tollgate/contracts';
import { isReservedHeader } from '../wire/reserved-headers';
import { ALERT_EVENT_TYPES, SLACK_MAX_EVENTS } from '../wire/slack';
import { REPRICED_EVENT_TYPE, STEP_EVENT_TYPE } from '../wire/wire-event';

export const EXPORTER_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const exporterNameSchema = z
  .string()
  .regex(EXPORTER_NAME, 'must be 1-63 characters: lowercase letters, digits, - and _, starting with a letter or digit');

const httpUrl = z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' });
const headerName = z
  .string()
  .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'must be a valid HTTP header name')
  .refine(
    (h) => !isReservedHeader(h),
    'is set by the sender (Host and the headers that frame the request cannot be configured)',
  );
const headerValue = z
  .string()
  .min(1)
  .max(4096)
  .regex(/^[\t\x20-\x7e\x80-\xff]*$/, 'must not contain control characters (line breaks included)');
/** Sent with every request and stored encrypted (they usually carry credentials). */
const secretHeaders = z
  .record(headerName, headerValue)
  .refine((h) => Object.keys(h).length <= 20, 'must have at most 20 headers');

const batchSchema = z.strictObject({
  /** Most events in one request. */
  maxEvents: z.number().int().min(1).max(10_000).default(500),
  /** Most bytes of events in one request (one event over it is still sent, alone). */
  maxBytes: z
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(1024 * 1024),
  /** A batch smaller than both limits is sent once its oldest event has waited this long. */
  maxWaitMs: z.number().int().min(0).max(600_000).default(1000),
});

const retrySchema = z.strictObject({
  /** Attempts per batch before it goes to the dead-letter set. */
  maxAttempts: z.number().int().min(1).max(50).default(8),
  /** First backoff; each retry doubles it, with jitter, up to maxBackoffMs. */
  initialBackoffMs: z.number().int().min(10).max(600_000).default(1000),
  maxBackoffMs: z.number().int().min(10).max(3_600_000).default(300_000),
});

const common = {
  batch: batchSchema.default(batchSchema.parse({})),
  retry: retrySchema.default(retrySchema.parse({})),
  /**
   * Per request; a request that takes longer is a failed attempt. At most EXPORTS_MAX_TIMEOUT_MS
   * (checked by the service, which also fills the default: 10 s, or that cap when lower).
   */
  timeoutMs: z.number().int().min(100).max(120_000).optional(),
  /** Batches dead-lettered in a row before the exporter pauses itself. */
  pauseAfterFailures: z.number().int().min(1).max(1000).default(3),
  /** Where a new exporter starts: events committed from now on (default), or the project's whole log. Ignored on update. */
  startFrom: z.enum(['now', 'beginning']).default('now'),
};

/** What a sink gets by default: each step, and each correction of a step's cost (see wire-event.ts). */
export const DEFAULT_EVENT_TYPES = [STEP_EVENT_TYPE, REPRICED_EVENT_TYPE];

export const webhookSchema = z.strictObject({
  type: z.literal('webhook'),
  url: httpUrl,
  /** HMAC-SHA256 key for the X-Tollgate-Signature header. Stored encrypted, never returned. */
  signingSecret: z.string().min(16, 'must be at least 16 characters').max(512),
  headers: secretHeaders.optional(),
  /** Event types sent; `["*"]` sends every type in the log. Default: step usage only. */
  eventTypes: z
    .array(z.string().regex(/^(\*|[A-Za-z]{1,64})$/, 'must be an event type name or *'))
    .min(1)
    .max(20)
    .default(DEFAULT_EVENT_TYPES),
  ...common,
});

export const otlpSchema = z.strictObject({
  type: z.literal('otlp'),
  /** OTLP/HTTP base URL (e.g. http://collector:4318); /v1/traces is appended unless given. */
  endpoint: httpUrl,
  headers: secretHeaders.optional(),
  /** service.name of the spans whose event names none. */
  serviceName: shortText(200).default('tollgate'),
  ...common,
});

/**
 * A Slack (or Slack-compatible: Mattermost, Rocket.Chat) incoming webhook: one message per batch
 * of budget alerts, naming each scope, policy and usage against its limit.
 */
export const slackSchema = z.strictObject({
  type: z.literal('slack'),
  /** The incoming webhook's URL. It is the credential: stored encrypted, never returned. */
  url: httpUrl,
  /** Event types sent (default: the budget alerts). */
  eventTypes: z
    .array(z.enum(['BudgetThresholdCrossed', 'BudgetExhausted']))
    .min(1)
    .max(2)
    .default(ALERT_EVENT_TYPES as ['BudgetThresholdCrossed', 'BudgetExhausted']),
  /** The dashboard's address (e.g. https://tollgate.example.com/dashboard): each alert links to its scope's page. */
  dashboardUrl: httpUrl.optional(),
  ...common,
  batch: batchSchema
    .extend({
      maxEvents: z
        .number()
        .int()
        .min(1)
        .max(SLACK_MAX_EVENTS, `must be at most ${SLACK_MAX_EVENTS} (a Slack message holds 50 blocks)`)
        .default(20),
    })
    .default({ maxEvents: 20, maxBytes: 1024 * 1024, maxWaitMs: 1000 }),
});

export const putExporterSchema = z.discriminatedUnion('type', [webhookSchema, otlpSchema, slackSchema]);
export type PutExporter = z.infer<typeof putExporterSchema>;

/** What is stored in `secrets` (sealed). */
export interface ExporterSecrets {
  signingSecret?: string;
  /** A Slack exporter's webhook URL. */
  url?: string;
  headers?: Record<string, string>;
}

/** What is stored in `settings`: the validated body without its secrets and startFrom. */
export type ExporterSettings =
  | (Omit<z.infer<typeof webhookSchema>, 'signingSecret' | 'headers' | 'startFrom' | 'timeoutMs'> & {
      timeoutMs: number;
    })
  | (Omit<z.infer<typeof otlpSchema>, 'headers' | 'startFrom' | 'timeoutMs'> & { timeoutMs: number })
  | (Omit<z.infer<typeof slackSchema>, 'url' | 'startFrom' | 'timeoutMs'> & { timeoutMs: number });

export const DEFAULT_TIMEOUT_MS = 10_000;

/** The field that names an exporter's destination, for errors. */
export const destinationField = (body: Pick<PutExporter, 'type'>) => (body.type === 'otlp' ? 'endpoint' : 'url');

export function splitSecrets(
  body: PutExporter,
  timeoutMs: number,
): { settings: ExporterSettings; secrets: ExporterSecrets | null } {
  if (body.type === 'webhook') {
    const { signingSecret, headers, startFrom: _s, ...settings } = body;
    return { settings: { ...settings, timeoutMs }, secrets: { signingSecret, ...(headers ? { headers } : {}) } };
  }
  if (body.type === 'slack') {
    const { url, startFrom: _s, ...settings } = body;
    return { settings: { ...settings, timeoutMs }, secrets: { url } };
  }
  const { headers, startFrom: _s, ...settings } = body;
  return { settings: { ...settings, timeoutMs }, secrets: headers ? { headers } : null };
}

export const replaySchema = z
  .strictObject({
    /** Re-send every event at or after this log position. */
    fromPosition: z.number().int().min(0).optional(),
    /** Re-send every event that occurred at or after this time. */
    fromTime: isoInstantSchema.optional(),
  })
  .refine((b) => (b.fromPosition === undefined) !== (b.fromTime === undefined), {
    message: 'give exactly one of fromPosition and fromTime',
    path: ['fromPosition'],
  });

// ---- Response schemas (the OpenAPI document's; test/exporters/webhook.spec.ts parses real answers with them) ----

const position = z.strictObject({
  tx: z.string().describe('The transaction id of the log position'),
  position: z.string().describe('The log position (a bigint, as a string)'),
});

/** What an exporter's `settings` holds: its validated body without secrets and startFrom. */
const storedSettings = z
  .discriminatedUnion('type', [
    webhookSchema.omit({ signingSecret: true, headers: true, startFrom: true, timeoutMs: true }).extend({
      timeoutMs: z.number(),
    }),
    otlpSchema.omit({ headers: true, startFrom: true, timeoutMs: true }).extend({ timeoutMs: z.number() }),
    slackSchema.omit({ url: true, startFrom: true, timeoutMs: true }).extend({ timeoutMs: z.number() }),
  ])
  .describe('The settings as stored, defaults filled, without the secrets');

/** An exporter as GET /v1/exporters/:name answers it. */
export const exporterResponse = z.strictObject({
  name: z.string(),
  type: z.enum(['webhook', 'otlp', 'slack']),
  settings: storedSettings,
  secrets: z
    .union([
      z.strictObject({
        signingSecret: z.boolean(),
        headers: z.array(z.string()).describe('The names of the secret headers'),
        url: z.literal(true).optional().describe('Set for a Slack exporter: its webhook URL is the secret'),
      }),
      z
        .strictObject({ sealed: z.literal(true) })
        .describe('Secrets the server cannot open (TOLLGATE_SECRET_KEY unset or changed)'),
    ])
    .nullable()
    .describe('Which secrets are set; their values are never returned'),
  status: z.enum(['active', 'paused']),
  pausedReason: z.string().nullable().describe('Why it paused (through the API, or after failures in a row)'),
  consecutiveFailures: z.number().describe('Batches dead-lettered in a row'),
  checkpoint: position.describe('The last log position sent'),
  inFlightBatch: z.string().nullable().describe('The batch being delivered, if any'),
  lag: z
    .strictObject({ events: z.number(), seconds: z.number().describe('Age of the oldest unsent event') })
    .nullable()
    .describe('Events in the log not yet sent'),
  deadLetters: z.strictObject({ batches: z.number(), events: z.number() }).nullable(),
  lastDeliveredAt: z.string().nullable().describe('ISO 8601'),
  createdAt: z.string().describe('ISO 8601'),
  updatedAt: z.string().describe('ISO 8601'),
});

export const putExporterResponse = exporterResponse.extend({
  created: z.boolean().describe('true when the request created the exporter, false when it replaced it'),
});
export const replayResponse = exporterResponse.extend({
  replay: z.strictObject({ rewound: z.boolean().describe('false when the checkpoint was already before the point') }),
});
export const exportersResponse = z.strictObject({ exporters: z.array(exporterResponse) });
export const deadLettersResponse = z.strictObject({
  deadLetters: z.array(
    z.strictObject({
      id: z.string().describe('The batch id (xb_…), also the Idempotency-Key it is sent with'),
      status: z.enum(['dead', 'retrying']).describe('dead: failed for good; retrying: sent again through the API'),
      events: z.number(),
      from: position,
      to: position,
      attempts: z.number(),
      lastError: z.string().nullable(),
      createdAt: z.string().describe('ISO 8601'),
      failedAt: z.string().nullable().describe('ISO 8601'),
    }),
  ),
});
export const retryResponse = z.strictObject({
  retrying: z.array(z.string()).describe('The batch ids sent again'),
});
