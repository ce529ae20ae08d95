import { Injectable } from '@nestjs/common';
import { CACHE_CHANNELS, notifySql, PrismaService } from '@tollgate/database';
import { Clock, Config } from '@tollgate/platform';
import { randomBytes } from 'node:crypto';
import { ProjectSettingsReader } from '../project-settings/project-settings.reader';
import { readProjectSettings } from '../project-settings/project-settings.sql';
import { normalizeModel, normalizeProvider, type PriceOverrideRate } from '../pricing/price-step';
import { earliestUnpricedStep, stepsPricedOtherwise } from '../reprice/step-costs.sql';

const DAY = 86_400_000;

export interface PriceInput {
  effectiveFrom?: string;
  currency: string;
  inputPerMillion: number;
  outputPerMillion: number;
  cacheReadPerMillion?: number;
  cacheWritePerMillion?: number;
  cacheWrite1hPerMillion?: number;
}

type PriceRow = {
  id: string;
  provider: string;
  model: string;
  effectiveFrom: Date;
  currency: string;
  inputPerMillion: { toNumber(): number };
  outputPerMillion: { toNumber(): number };
  cacheReadPerMillion: { toNumber(): number } | null;
  cacheWritePerMillion: { toNumber(): number } | null;
  cacheWrite1hPerMillion: { toNumber(): number } | null;
};

const priceView = (r: PriceRow) => ({
  id: r.id,
  provider: r.provider,
  model: r.model,
  effectiveFrom: r.effectiveFrom.toISOString(),
  currency: r.currency,
  inputPerMillion: r.inputPerMillion.toNumber(),
  outputPerMillion: r.outputPerMillion.toNumber(),
  cacheReadPerMillion: r.cacheReadPerMillion?.toNumber() ?? null,
  cacheWritePerMillion: r.cacheWritePerMillion?.toNumber() ?? null,
  cacheWrite1hPerMillion: r.cacheWrite1hPerMillion?.toNumber() ?? null,
});

export type PriceView = ReturnType<typeof priceView>;

/** Stored steps that the new price would price, priced otherwise: they change only with a reprice. */
export interface RepriceWarning {
  code: 'stored_steps_priced_otherwise';
  steps: number;
  message: string;
  /** The call that applies the price to them. */
  reprice: {
    method: 'POST';
    path: '/v1/prices/reprice';
    body: { from: string; to: string; provider: string; model: string };
  };
}

const sameRates = (a: PriceOverrideRate, b: PriceInput) =>
  a.currency === b.currency &&
  a.inputPerMillion === b.inputPerMillion &&
  a.outputPerMillion === b.outputPerMillion &&
  (a.cacheReadPerMillion ?? null) === (b.cacheReadPerMillion ?? null) &&
  (a.cacheWritePerMillion ?? null) === (b.cacheWritePerMillion ?? null) &&
  (a.cacheWrite1hPerMillion ?? null) === (b.cacheWrite1hPerMillion ?? null);

/**
 * A project's price overrides. Setting one prices the steps ingested from then on; the steps
 * already stored keep their cost until a reprice — so the answer says how many stored steps the
 * price would price otherwise, and names the reprice call that applies it to them.
 */
@Injectable()
export class PricesService {
  constructor(
    private readonly prisma: PrismaService,
    private readonly settings: ProjectSettingsReader,
    private readonly config: Config,
    private readonly clock: Clock,
  ) {}

  /** The project's overrides, by provider, model and effectiveFrom. */
  async list(projectId: string): Promise<PriceView[]> {
    const rows = await this.prisma.priceOverride.findMany({
      where: { projectId },
      orderBy: [{ provider: 'asc' }, { model: 'asc' }, { effectiveFrom: 'asc' }],
    });
    return rows.map(priceView);
  }

  async put(projectId: string, provider: string, model: string, body: PriceInput) {
    const now = this.clock.now();
    const p = normalizeProvider(provider);
    const m = normalizeModel(provider, model);
    const overrides = ((await readProjectSettings(this.prisma.sql, projectId))?.overrides ?? []).filter(
      (o) => normalizeProvider(o.provider) === p && normalizeModel(o.provider, o.model) === m,
    );
    const { effectiveFrom, defaulted } = await this.effectiveFromOf(projectId, p, m, body, overrides, now);
    const before = overrides.find(
      (o) => o.provider === provider && o.model === model && o.effectiveFrom.getTime() === effectiveFrom.getTime(),
    );
    const data = {
      currency: body.currency,
      inputPerMillion: body.inputPerMillion,
      outputPerMillion: body.outputPerMillion,
      cacheReadPerMillion: body.cacheReadPerMillion ?? null,
      cacheWritePerMillion: body.cacheWritePerMillion ?? null,
      cacheWrite1hPerMillion: body.cacheWrite1hPerMillion ?? null,
    };
    // Ingest and the guard cache a project's prices: announce the change in the same transaction.
    const [row] = await this.prisma.$transaction([
      this.prisma.priceOverride.upsert({
        where: { projectId_provider_model_effectiveFrom: { projectId, provider, model, effectiveFrom } },
        create: { id: `prc_${randomBytes(8).toString('hex')}`, projectId, provider, model, effectiveFrom, ...data },
        update: data,
      }),
      this.prisma.$executeRawUnsafe(notifySql(CACHE_CHANNELS.projects), projectId),
    ]);
    this.settings.evict(projectId);

    // In force until the model's next override.
    const next = overrides
      .map((o) => o.effectiveFrom.getTime())
      .filter((t) => t > effectiveFrom.getTime())
      .sort((a, b) => a - b)[0];
    const otherwise = await stepsPricedOtherwise(this.prisma.sql, projectId, {
      provider: p,
      model: m,
      from: effectiveFrom,
      to: next === undefined ? null : new Date(next),
      priceId: `override:${row.id}`,
      includeOwn: before !== undefined && !sameRates(before, body),
    });
    const warnings: RepriceWarning[] = [];
    if (otherwise.steps > 0 && otherwise.last) {
      const call = {
        from: effectiveFrom.toISOString(),
        to: new Date(otherwise.last.getTime() + 1).toISOString(),
        provider,
        model,
      };
      warnings.push({
        code: 'stored_steps_priced_otherwise',
        steps: otherwise.steps,
        message:
          `${otherwise.steps} stored step(s) of ${provider}/${model} at or after ${call.from} were priced otherwise and keep that cost until they are repriced: ` +
          `POST /v1/prices/reprice ${JSON.stringify(call)} (or npm run tollgate -- prices reprice --project ${projectId} --from ${call.from} --to ${call.to} --provider ${provider} --model ${model}; add dryRun to see the delta first)`,
        reprice: { method: 'POST', path: '/v1/prices/reprice', body: call },
      });
    }
    return { ...priceView(row), ...(defaulted ? { effectiveFromDefault: defaulted } : {}), warnings };
  }

  /**
   * Without effectiveFrom, a model's FIRST override starts at the project's earliest step of it
   * that is still unpriced (within the ingest age limit), so the reprice it names prices the
   * steps a new user just sent — a null cost says nothing a price could contradict. Otherwise it
   * is a price change from now on: history priced by the catalog or an earlier override is never
   * re-dated without being asked (give effectiveFrom, then reprice).
   */
  private async effectiveFromOf(
    projectId: string,
    provider: string,
    model: string,
    body: PriceInput,
    overrides: PriceOverrideRate[],
    now: Date,
  ) {
    if (body.effectiveFrom) return { effectiveFrom: new Date(body.effectiveFrom), defaulted: undefined };
    if (overrides.length === 0) {
      const since = new Date(now.getTime() - this.config.values.INGEST_MAX_AGE_DAYS * DAY);
      const earliest = await earliestUnpricedStep(this.prisma.sql, projectId, { provider, model, since });
      if (earliest) return { effectiveFrom: earliest, defaulted: 'earliest_unpriced_step' as const };
    }
    return { effectiveFrom: now, defaulted: 'now' as const };
  }
}
