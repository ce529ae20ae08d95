import { Injectable } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import { Caches } from '@tollgate/platform';
import { readProjectSettings, type ProjectSettings } from '../check-guard/project-settings.sql';
import type { PriceOverrideRate } from '../pricing/price-step';

/**
 * A project's price overrides, for pricing at ingest: from the project settings cache that the
 * guard uses too (a PUT /v1/prices announces itself to every replica in its own transaction).
 */
@Injectable()
export class PriceOverrides {
  constructor(
    private readonly prisma: PrismaService,
    private readonly caches: Caches,
  ) {}

  async forProject(projectId: string): Promise<PriceOverrideRate[]> {
    const settings = (await this.caches.projects.get(projectId, () => readProjectSettings(this.prisma.sql, projectId))) as ProjectSettings | null;
    return settings?.overrides ?? [];
  }
}
