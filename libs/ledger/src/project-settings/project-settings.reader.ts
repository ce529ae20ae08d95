import { Injectable } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import { Caches } from '@tollgate/platform';
import { readProjectSettings, type ProjectSettings } from './project-settings.sql';

/**
 * A project's settings (money, policies, price overrides, accepted event age) through the
 * per-process cache that every replica invalidates on NOTIFY, for the guard, ingest and estimates
 * alike. Null when the project does not exist.
 */
@Injectable()
export class ProjectSettingsReader {
  constructor(
    private readonly prisma: PrismaService,
    private readonly caches: Caches,
  ) {}

  async get(projectId: string): Promise<ProjectSettings | null> {
    return (await this.caches.projects.get(projectId, () => readProjectSettings(this.prisma.sql, projectId))) as ProjectSettings | null;
  }
}
