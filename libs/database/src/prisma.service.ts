import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { PrismaPg } from '@prisma/adapter-pg';
import { Pool } from 'pg';
import { PrismaClient } from '../../../generated/prisma/client';
import { inOneTrip, inTransaction, poolSql, type Sql, type Statement, type TxSql } from './sql';

/**
 * The one Prisma client of a process, on a pg pool we own so that pool usage can be reported
 * and the pool closed on shutdown.
 */
@Injectable()
export class PrismaService extends PrismaClient implements OnModuleDestroy {
  readonly pool: Pool;
  readonly poolSize: number;
  /** Hot-path SQL on the same pool (see sql.ts for why not through Prisma). */
  readonly sql: Sql;

  constructor(url: string, poolSize: number) {
    const pool = new Pool({
      connectionString: url,
      max: poolSize,
      // A request must get a clear answer when PostgreSQL is down, never hang on a connection.
      connectionTimeoutMillis: 3000,
      idleTimeoutMillis: 30_000,
      application_name: 'tollgate',
      // Hot-path statements are named (prepared once per connection, see sql.ts) and written to be
      // planned for any parameters; PostgreSQL's first five custom plans of the guard's usage read
      // cost 15-25 ms each (it plans every monthly partition), its generic plan ~0.1 ms. Unnamed
      // statements (Prisma's, the metric queries) are always planned with their values.
      options: '-c plan_cache_mode=force_generic_plan',
    });
    // A client losing its connection (PostgreSQL restarted) must not crash the process: an idle one
    // reports it to the pool; a checked-out one between two queries (a transaction's work, a read
    // overlapping a write) has no listener but this one. Its next query fails, and a released
    // client whose connection ended is dropped by the pool.
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
    super({ adapter: new PrismaPg(pool) });
    this.poolSize = poolSize;
    this.pool = pool;
    this.sql = poolSql(pool);
  }

  /** One transaction on one connection of the pool, for hot-path SQL. */
  transaction<T>(
    fn: (sql: TxSql, opened: Record<string, unknown>[][]) => Promise<T>,
    timeoutMs?: number,
    opening?: readonly Statement[],
  ): Promise<T> {
    return inTransaction(this.pool, fn, timeoutMs, opening);
  }

  /** Statements as one transaction in one round trip (see inOneTrip in sql.ts); the rows of each. */
  oneTrip(statements: readonly Statement[], timeoutMs?: number): Promise<Record<string, unknown>[][]> {
    return inOneTrip(this.pool, statements, timeoutMs);
  }

  async onModuleDestroy(): Promise<void> {
    await this.$disconnect();
    await this.pool.end().catch(() => undefined);
  }
}
