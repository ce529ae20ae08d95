import { Body, Controller, Get, Param, Put, UseGuards } from '@nestjs/common';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { z } from 'zod';
import { EARLIEST_OCCURRED_AT, idSchema } from '@tollgate/contracts';
import { PricesService } from './prices.service';

const LATEST_EFFECTIVE_FROM = Date.UTC(2100, 0, 1);

const rate = z
  .number({ error: 'must be a number' })
  .finite('must be finite')
  .min(0, 'must not be negative')
  .max(1_000_000, 'must be at most 1000000');

export const putPriceSchema = z.strictObject({
  /**
   * From when this price applies (events are priced at their occurredAt). Defaults to the
   * project's earliest still-unpriced step of the model when the model has no override yet,
   * otherwise to now.
   */
  effectiveFrom: z.iso
    .datetime({ offset: true, message: 'must be an ISO-8601 timestamp with a time zone' })
    .refine(
      (s) => Date.parse(s) >= EARLIEST_OCCURRED_AT && Date.parse(s) < LATEST_EFFECTIVE_FROM,
      'must be between 2000-01-01 and 2100-01-01',
    )
    .optional(),
  currency: z
    .string()
    .regex(/^[A-Z]{3}$/, 'must be a three-letter currency code such as USD')
    .default('USD'),
  inputPerMillion: rate,
  outputPerMillion: rate,
  cacheReadPerMillion: rate.optional(),
  cacheWritePerMillion: rate.optional(),
  /** Cache writes with the 1-hour time to live (`usage.cacheWrite1hTokens`); defaults to cacheWritePerMillion. */
  cacheWrite1hPerMillion: rate.optional(),
});

const rateOut = z.number().nullable();
/** A stored price override, as priceView answers it. */
export const priceResponse = z.object({
  id: z.string().describe('prc_…; events priced by it carry `override:<id>` as their price id'),
  provider: z.string(),
  model: z.string(),
  effectiveFrom: z
    .string()
    .describe('ISO 8601: events that occurred at or after it are priced by this override (until a later one)'),
  currency: z.string().describe('Three-letter currency code'),
  inputPerMillion: z.number().describe('Per million uncached input tokens (and cache tokens whose own rate is null)'),
  outputPerMillion: z.number().describe('Per million output tokens (reasoning included)'),
  cacheReadPerMillion: rateOut.describe('null: cache reads are priced as input'),
  cacheWritePerMillion: rateOut.describe('null: cache writes are priced as input'),
  cacheWrite1hPerMillion: rateOut.describe('null: 1-hour cache writes are priced as cache writes'),
});

/** What PUT /v1/prices/:provider/:model answers: the stored override, and what it leaves priced otherwise. */
export const putPriceResponse = z.strictObject({
  ...priceResponse.shape,
  effectiveFromDefault: z
    .enum(['earliest_unpriced_step', 'now'])
    .optional()
    .describe("Set when effectiveFrom was not given: the model's earliest unpriced step, or now"),
  warnings: z
    .array(
      z.strictObject({
        code: z.literal('stored_steps_priced_otherwise'),
        steps: z.number().describe('Stored steps in force of this price that keep their other cost'),
        message: z.string(),
        reprice: z
          .strictObject({
            method: z.literal('POST'),
            path: z.literal('/v1/prices/reprice'),
            body: z.strictObject({ from: z.string(), to: z.string(), provider: z.string(), model: z.string() }),
          })
          .describe('The call that applies the price to them'),
      }),
    )
    .describe('Empty when no stored step is priced otherwise'),
});

/** A project's own prices for models, versioned by the time they take effect. */
@Controller('v1/prices')
@UseGuards(AuthGuard)
export class PricesController {
  constructor(private readonly prices: PricesService) {}

  @Put(':provider/:model')
  @RequireScope('admin')
  @Documented({
    summary:
      "Set the project's price for a model from a given time on (answers with a warning naming the reprice call when stored steps are priced otherwise)",
    tag: 'prices',
    auth: 'admin',
    body: putPriceSchema,
    response: putPriceResponse,
  })
  put(
    @CurrentPrincipal() principal: Principal,
    @Param('provider', new ZodPipe(idSchema, 'provider')) provider: string,
    @Param('model', new ZodPipe(idSchema, 'model')) model: string,
    @Body(new ZodPipe(putPriceSchema)) body: z.infer<typeof putPriceSchema>,
  ) {
    return this.prices.put(principal.projectId, provider, model, body);
  }

  @Get()
  @RequireScope('read')
  @Documented({
    summary: "List the project's price overrides",
    tag: 'prices',
    auth: 'read',
    response: z.object({ prices: z.array(priceResponse) }),
  })
  async list(@CurrentPrincipal() principal: Principal) {
    return { prices: await this.prices.list(principal.projectId) };
  }
}
