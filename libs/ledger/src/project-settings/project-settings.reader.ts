import { Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { CACHE_CHANNELS, NotifiedCache, PrismaService } from '@tollgate/database';
import { Config } from '@tollgate/platform';
import { readProjectSettings, type ProjectSettings } from './project-settings.sql';

/**
 * A project's settings (money, policies, price overrides, accepted event age) through the
 * per-process cache that every replica invalidates on NOTIFY, for the guard, ingest and estimates
 * alike. Null when the project does not exist.
 */
@Injectable()
export class ProjectSettingsReader implements OnModuleInit, OnModuleDestroy {
  private readonly cache: NotifiedCache<ProjectSettings | null>;

  constructor(
    private readonly prisma: PrismaService,
    config: Config,
  ) {
    this.cache = new NotifiedCache(config.values.DATABASE_URL, CACHE_CHANNELS.projects);
  }

  onModuleInit(): void {
    this.cache.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.cache.close();
  }

  get(projectId: string): Promise<ProjectSettings | null> {
    return this.cache.get(projectId, () => readProjectSettings(this.prisma.sql, projectId));
  }

  /**
   * Forgets this process's copy after a change; the change itself announces it to the other
   * replicas (`notifySql(CACHE_CHANNELS.projects)` in the changing transaction).
   */
  evict(projectId: string): void {
    this.cache.evict(projectId);
  }
}
