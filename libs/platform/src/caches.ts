import { Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { CACHE_CHANNELS, NotifiedCache } from '@tollgate/database';
import { Config } from './config';

/** An API key as authentication reads it; null in the cache: no key of that id. */
export type KeyRow = { project_id: string; secret_hash: string; scopes: string[]; revoked_at: Date | null };

/**
 * The hot path's cache of API keys by id (every request authenticates). Invalidated across
 * replicas by LISTEN/NOTIFY (see NotifiedCache); a change is announced in its own transaction.
 * A project's settings have their own cache, in the ledger (ProjectSettingsReader).
 */
@Injectable()
export class Caches implements OnModuleInit, OnModuleDestroy {
  readonly keys: NotifiedCache<KeyRow | null>;

  constructor(config: Config) {
    this.keys = new NotifiedCache(config.values.DATABASE_URL, CACHE_CHANNELS.keys);
  }

  onModuleInit(): void {
    this.keys.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.keys.close();
  }
}
