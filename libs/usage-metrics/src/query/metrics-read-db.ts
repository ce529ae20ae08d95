import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import { Config } from '@tollgate/platform';
import { Pool } from 'pg';
import type { SqlClient } from '../projection/rollup-store.sql';

/**
 * Where metric queries run: a pool on DATABASE_READ_URL (a read replica) when it is set, the main
 * pool otherwise. Only the query side reads here — the projector writes and the guard must see
 * the primary's latest commit, so neither uses it. On a replica an answer (rollups and the log
 * tail past their checkpoint alike) is as of the replica's replay point, and its `lag` includes
 * the replica's replay lag. While the replica cannot be reached they run on the primary.
 */
@Injectable()
export class MetricsReadDb implements OnModuleDestroy {
  readonly db: SqlClient;
  /** Null when queries share the main pool. */
  readonly replica: Pool | null;
  /** Queries that ran on the primary because the replica could not be reached. */
  fallbacks = 0;
  private warnedAt = 0;
  private replicaDownUntil = 0;
  private readonly logger = new Logger('metrics-read-db');

  constructor(prisma: PrismaService, config: Config) {
    const url = config.values.DATABASE_READ_URL;
    if (!url) {
      this.db = prisma;
      this.replica = null;
      return;
    }
    const pool = new Pool({
      connectionString: url,
      max: config.values.DATABASE_POOL_SIZE,
      connectionTimeoutMillis: 1000,
      idleTimeoutMillis: 30_000,
      application_name: 'tollgate-metrics-read',
    });
    pool.on('error', () => undefined);
    this.replica = pool;
    // A replica that cannot be reached (stopped, restarting, failed over) is not an outage of the
    // metric queries: they run on the primary meanwhile, as exact (and current) as there.
    // After a failure the replica is tried again only every REPLICA_RETRY_MS (no connect timeout per query).
    const onReplica = async <R>(run: (db: SqlClient) => Promise<R>): Promise<R> => {
      if (Date.now() < this.replicaDownUntil) {
        this.fallbacks += 1;
        return run(prisma);
      }
      try {
        return await run(replicaDb);
      } catch (err) {
        if (!unreachable(err)) throw err;
        this.replicaDownUntil = Date.now() + REPLICA_RETRY_MS;
        this.fallbacks += 1;
        if (Date.now() - this.warnedAt > 10_000) {
          this.warnedAt = Date.now();
          this.logger.warn({
            msg: 'read replica unreachable: metric queries run on the primary',
            error: (err as Error).message,
          });
        }
        return run(prisma);
      }
    };
    const replicaDb: SqlClient = {
      $queryRawUnsafe: async <T>(sql: string, ...values: unknown[]) => (await pool.query(sql, values)).rows as T,
      $executeRawUnsafe: async (sql: string, ...values: unknown[]) => (await pool.query(sql, values)).rowCount ?? 0,
    };
    this.db = {
      $queryRawUnsafe: <T>(sql: string, ...values: unknown[]) =>
        onReplica((db) => db.$queryRawUnsafe<T>(sql, ...values)),
      $executeRawUnsafe: (sql: string, ...values: unknown[]) => onReplica((db) => db.$executeRawUnsafe(sql, ...values)),
    };
  }

  async onModuleDestroy(): Promise<void> {
    await this.replica?.end().catch(() => undefined);
  }
}

const REPLICA_RETRY_MS = 2000;

/** Errors that mean the replica is not there (as opposed to a query that failed on it). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08006',
]);
function unreachable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (e?.code && UNREACHABLE_CODES.has(e.code)) return true;
  return /timeout exceeded when trying to connect|Connection terminated|connection (?:is )?closed|Client has encountered a connection error/i.test(
    e?.message ?? '',
  );
}
