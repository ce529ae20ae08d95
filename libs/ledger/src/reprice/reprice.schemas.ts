import { EARLIEST_OCCURRED_AT, idSchema } from '@tollgate/contracts';
import { z } from 'zod';

const LATEST = Date.UTC(2100, 0, 1);

const instant = z.iso
  .datetime({ offset: true, message: 'must be an ISO-8601 timestamp with a time zone' })
  .refine(
    (s) => Date.parse(s) >= EARLIEST_OCCURRED_AT && Date.parse(s) < LATEST,
    'must be between 2000-01-01 and 2100-01-01',
  );

/** `POST /v1/prices/reprice` (and `tollgate prices reprice`): a bounded range, optionally one model. */
export const repriceSchema = z
  .strictObject({
    /** Steps that occurred at or after this instant… */
    from: instant,
    /** …and before this one. Both are required: a reprice is always bounded. */
    to: instant,
    /** Only this provider's steps (as the catalog names it: `openai.responses` is `openai`). */
    provider: idSchema.optional(),
    /** Only this model's steps (needs `provider`). */
    model: idSchema.optional(),
    /** Report what would change (count and delta) without appending anything. */
    dryRun: z.boolean({ error: 'must be true or false' }).default(false),
  })
  .superRefine((b, ctx) => {
    if (Date.parse(b.to) <= Date.parse(b.from))
      ctx.addIssue({ code: 'custom', path: ['to'], message: 'must be after from' });
    if (b.model !== undefined && b.provider === undefined)
      ctx.addIssue({ code: 'custom', path: ['provider'], message: 'is required with model' });
  });

export type RepriceBody = z.infer<typeof repriceSchema>;

/** What `POST /v1/prices/reprice` answers (the OpenAPI document's response schema). */
export const repriceResponse = z.strictObject({
  dryRun: z.boolean().describe('true: nothing was appended; the counts say what would be'),
  from: z.string().describe('ISO 8601, as asked'),
  to: z.string().describe('ISO 8601, as asked'),
  provider: z.string().nullable(),
  model: z.string().nullable(),
  scanned: z.number().describe('Steps read in the range'),
  repriced: z.number().describe('StepRepriced corrections appended (a dry run: that would be)'),
  unchanged: z.number().describe('Steps whose cost is the same at the prices in force'),
  providerReported: z.number().describe('Steps with a provider-reported cost, never repriced'),
  newlyPriced: z.number().describe('Repriced steps that had no price and have one now'),
  newlyUnpriced: z.number().describe('Repriced steps that had a price and have none now'),
  deltaByUnit: z
    .record(z.string(), z.strictObject({ costMicros: z.number(), cost: z.number() }))
    .describe('The sum of new − old cost per unit; units whose sum is 0 are left out'),
  batches: z.number().describe('Transactions that read steps'),
});
