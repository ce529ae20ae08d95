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
    const rows = await this.prisma.sql.query<{ id: string; provider: string; model: string; effective_from: Date; currency: string; input_per_million: string; output_per_million: string; cache_read_per_million: string | null; cache_write_per_million: string | null }>(
      `SELECT id, provider, model, effective_from, currency, input_per_million, output_per_million, cache_read_per_million, cache_write_per_million
         FROM price_overrides WHERE project_id = $1`,
      projectId,
    );
    return rows.map((r) => ({
      id: r.id,
      provider: r.provider,
      model: r.model,
      effectiveFrom: r.effective_from,
      currency: r.currency,
      inputPerMillion: Number(r.input_per_million),
      outputPerMillion: Number(r.output_per_million),
      cacheReadPerMillion: r.cache_read_per_million === null ? null : Number(r.cache_read_per_million),
      cacheWritePerMillion: r.cache_write_per_million === null ? null : Number(r.cache_write_per_million),
    }));
  }
}
