import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import { Config } from '@tollgate/platform';
import { Pool } from 'pg';
import type { SqlClient } from '../projection/rollup-store.sql';

/**
 * Where metric queries run: a pool on DATABASE_READ_URL (a read replica) when it is set, the main
 * pool otherwise. Only the query side reads here — the projector writes and the guard must see
 * the primary's latest commit, so neither uses it. On a replica an answer (rollups and the log
 * tail past their checkpoint alike) is as of the replica's replay point.
 */
@Injectable()
export class MetricsReadDb implements OnModuleDestroy {
  readonly db: SqlClient;
  /** Null when queries share the main pool. */
  readonly replica: Pool | null;

  constructor(prisma: PrismaService, config: Config) {
    const url = config.values.DATABASE_READ_URL;
    if (!url) {
      this.db = prisma;
      this.replica = null;
      return;
    }
    const pool = new Pool({ connectionString: url, max: config.values.DATABASE_POOL_SIZE, connectionTimeoutMillis: 3000, idleTimeoutMillis: 30_000, application_name: 'tollgate-metrics-read' });
    pool.on('error', () => undefined);
    this.replica = pool;
    this.db = {
      $queryRawUnsafe: async <T>(sql: string, ...values: unknown[]) => (await pool.query(sql, values)).rows as T,
      $executeRawUnsafe: async (sql: string, ...values: unknown[]) => (await pool.query(sql, values)).rowCount ?? 0,
    };
  }

  async onModuleDestroy(): Promise<void> {
    await this.replica?.end().catch(() => undefined);
  }
}
