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
