import { z } from 'zod';
import { costUnitSchema, shortText } from '@tollgate/contracts';
import { KEY_SCOPES } from '@tollgate/platform';

export const createProjectSchema = z.strictObject({
  name: shortText(200),
  /**
   * What a cost budget does with a step whose model has no price: `deny` it (the default),
   * price it at `unpricedFallback`, or `count_tokens` (it costs nothing: the budget does not bind it).
   */
  unpricedPolicy: z.enum(['count_tokens', 'deny', 'fallback']).default('deny'),
  id: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{2,62}$/, 'must be 3-63 lowercase letters, digits, - or _')
    .optional(),
});

const rate = z
  .number({ error: 'must be a number' })
  .finite('must be finite')
  .min(0, 'must not be negative')
  .max(1_000_000, 'must be at most 1000000');

/** A project's money settings; every field optional, the others keep their value. */
export const projectSettingsSchema = z.strictObject({
  unpricedPolicy: z.enum(['count_tokens', 'deny', 'fallback']).optional(),
  /** Per million tokens, for unpricedPolicy `fallback`; `currency` defaults to the project's cost unit. */
  unpricedFallback: z
    .strictObject({ inputPerMillion: rate, outputPerMillion: rate, currency: costUnitSchema.optional() })
    .nullable()
    .optional(),
  /** The unit of every limit that names none. */
  costUnit: costUnitSchema.optional(),
  /** The value of one unit of each currency in the project's cost unit, e.g. { "JPY": 0.0067 }. */
  /** Days back this project accepts events (at most the operator's INGEST_MAX_AGE_DAYS); null: the operator's. */
  maxEventAgeDays: z
    .number({ error: 'must be a number' })
    .int('must be an integer')
    .min(1, 'must be at least 1')
    .max(3650, 'must be at most 3650')
    .nullable()
    .optional(),
  exchangeRates: z
    .record(
      costUnitSchema,
      z
        .number({ error: 'must be a number' })
        .finite('must be finite')
        .positive('must be positive')
        .max(1e9, 'must be at most 1e9'),
    )
    .optional(),
});
export type ProjectSettingsInput = z.infer<typeof projectSettingsSchema>;

export const createKeySchema = z.strictObject({
  scopes: z
    .array(z.enum(KEY_SCOPES))
    .min(1, 'must name at least one scope')
    .refine((s) => new Set(s).size === s.length, 'must not repeat a scope'),
  name: shortText(200).optional(),
});

export const projectResponse = z.object({
  id: z.string(),
  name: z.string(),
  unpricedPolicy: z.string(),
  unpricedFallback: z
    .object({ inputPerMillion: z.number(), outputPerMillion: z.number(), currency: z.string().optional() })
    .nullable(),
  costUnit: z.string(),
  exchangeRates: z.record(z.string(), z.number()),
  maxEventAgeDays: z.number().nullable(),
  createdAt: z.string(),
});
/** A key as listed: never the key itself. */
export const keyListResponse = z.array(
  z.object({
    id: z.string().describe('The key id (the part of the key after `tg_`, before the secret)'),
    name: z.string().nullable().describe('The name given at creation'),
    scopes: z.array(z.enum(KEY_SCOPES)).describe('What the key may do'),
    createdAt: z.string().describe('ISO 8601'),
    revokedAt: z.string().nullable().describe('ISO 8601; null while the key works'),
  }),
);
export const keyRevokedResponse = z.object({
  id: z.string().describe('The key id'),
  revoked: z.literal(true).describe('The key stopped working at once (idempotent)'),
});

export const keyResponse = z.object({
  id: z.string(),
  projectId: z.string(),
  key: z.string().describe('Shown once; only its hash is stored'),
  scopes: z.array(z.string()),
  name: z.string().nullable().describe('The name given at creation'),
  createdAt: z.string(),
});
