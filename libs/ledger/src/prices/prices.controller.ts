import { Body, Controller, Get, Param, Put, UseGuards } from '@nestjs/common';
import { CACHE_CHANNELS, notifySql, PrismaService } from '@tollgate/database';
import { AuthGuard, Caches, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { EARLIEST_OCCURRED_AT, idSchema } from '@tollgate/contracts';

const LATEST_EFFECTIVE_FROM = Date.UTC(2100, 0, 1);

const rate = z.number({ error: 'must be a number' }).finite('must be finite').min(0, 'must not be negative').max(1_000_000, 'must be at most 1000000');

export const putPriceSchema = z.strictObject({
  /** From when this price applies (events are priced at their occurredAt). Defaults to now. */
  effectiveFrom: z.iso
    .datetime({ offset: true, message: 'must be an ISO-8601 timestamp with a time zone' })
    .refine((s) => Date.parse(s) >= EARLIEST_OCCURRED_AT && Date.parse(s) < LATEST_EFFECTIVE_FROM, 'must be between 2000-01-01 and 2100-01-01')
    .optional(),
  currency: z.string().regex(/^[A-Z]{3}$/, 'must be a three-letter currency code such as USD').default('USD'),
  inputPerMillion: rate,
  outputPerMillion: rate,
  cacheReadPerMillion: rate.optional(),
  cacheWritePerMillion: rate.optional(),
});

const priceView = (r: { id: string; provider: string; model: string; effectiveFrom: Date; currency: string; inputPerMillion: { toNumber(): number }; outputPerMillion: { toNumber(): number }; cacheReadPerMillion: { toNumber(): number } | null; cacheWritePerMillion: { toNumber(): number } | null }) => ({
  id: r.id,
  provider: r.provider,
  model: r.model,
  effectiveFrom: r.effectiveFrom.toISOString(),
  currency: r.currency,
  inputPerMillion: r.inputPerMillion.toNumber(),
  outputPerMillion: r.outputPerMillion.toNumber(),
  cacheReadPerMillion: r.cacheReadPerMillion?.toNumber() ?? null,
  cacheWritePerMillion: r.cacheWritePerMillion?.toNumber() ?? null,
});

/** A project's own prices for models, versioned by the time they take effect. */
@Controller('v1/prices')
@UseGuards(AuthGuard)
export class PricesController {
  constructor(
    private readonly prisma: PrismaService,
    private readonly caches: Caches,
  ) {}

  @Put(':provider/:model')
  @RequireScope('admin')
  @Documented({ summary: "Set the project's price for a model from a given time on", tag: 'prices', auth: 'admin', body: putPriceSchema })
  async put(
    @CurrentPrincipal() principal: Principal,
    @Param('provider', new ZodPipe(idSchema, 'provider')) provider: string,
    @Param('model', new ZodPipe(idSchema, 'model')) model: string,
    @Body(new ZodPipe(putPriceSchema)) body: z.infer<typeof putPriceSchema>,
  ) {
    const effectiveFrom = body.effectiveFrom ? new Date(body.effectiveFrom) : new Date();
    const data = {
      currency: body.currency,
      inputPerMillion: body.inputPerMillion,
      outputPerMillion: body.outputPerMillion,
      cacheReadPerMillion: body.cacheReadPerMillion ?? null,
      cacheWritePerMillion: body.cacheWritePerMillion ?? null,
    };
    // Ingest and the guard cache a project's prices: announce the change in the same transaction.
    const [row] = await this.prisma.$transaction([this.prisma.priceOverride.upsert({
      where: { projectId_provider_model_effectiveFrom: { projectId: principal.projectId, provider, model, effectiveFrom } },
      create: { id: `prc_${randomBytes(8).toString('hex')}`, projectId: principal.projectId, provider, model, effectiveFrom, ...data },
      update: data,
    }), this.prisma.$executeRawUnsafe(notifySql(CACHE_CHANNELS.projects), principal.projectId)]);
    this.caches.projects.evict(principal.projectId);
    return priceView(row);
  }

  @Get()
  @RequireScope('read')
  @Documented({ summary: "List the project's price overrides", tag: 'prices', auth: 'read' })
  async list(@CurrentPrincipal() principal: Principal) {
    const rows = await this.prisma.priceOverride.findMany({ where: { projectId: principal.projectId }, orderBy: [{ provider: 'asc' }, { model: 'asc' }, { effectiveFrom: 'asc' }] });
    return { prices: rows.map(priceView) };
  }
}
