import { Injectable } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import type { PriceOverrideRate } from '../pricing/price-step';

/**
 * A project's price overrides. Read on every ingest batch (one indexed query): a cache would let
 * an API replica price with a stale rate after another replica accepted a new one.
 */
@Injectable()
export class PriceOverrides {
  constructor(private readonly prisma: PrismaService) {}

  async forProject(projectId: string): Promise<PriceOverrideRate[]> {
    const rows = await this.prisma.priceOverride.findMany({ where: { projectId } });
    return rows.map((r) => ({
      id: r.id,
      provider: r.provider,
      model: r.model,
      effectiveFrom: r.effectiveFrom,
      currency: r.currency,
      inputPerMillion: r.inputPerMillion.toNumber(),
      outputPerMillion: r.outputPerMillion.toNumber(),
      cacheReadPerMillion: r.cacheReadPerMillion?.toNumber() ?? null,
      cacheWritePerMillion: r.cacheWritePerMillion?.toNumber() ?? null,
    }));
  }
}
