import { Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { CACHE_CHANNELS, NotifiedCache } from '@tollgate/database';
import { Config } from './config';

/**
 * The hot paths' caches of rarely changing rows: API keys by id (every request authenticates) and
 * a project's guard settings (policies, unpriced policy, price overrides). Invalidated across
 * replicas by LISTEN/NOTIFY (see NotifiedCache); a change is announced in its own transaction.
 */
@Injectable()
export class Caches implements OnModuleInit, OnModuleDestroy {
  readonly keys: NotifiedCache<unknown>;
  readonly projects: NotifiedCache<unknown>;

  constructor(config: Config) {
    this.keys = new NotifiedCache(config.values.DATABASE_URL, CACHE_CHANNELS.keys);
    this.projects = new NotifiedCache(config.values.DATABASE_URL, CACHE_CHANNELS.projects);
  }

  onModuleInit(): void {
    this.keys.start();
    this.projects.start();
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all([this.keys.close(), this.projects.close()]);
  }
}
