import type { PrismaService } from './prisma.service';

/** A table whose statistics were taken again, and what had changed in it since they last were. */
export interface AnalyzedTable {
  table: string;
  changedRows: number;
}

/**
 * Keeps the statistics of Tollgate's tables current, so that no cached plan outlives the table
 * size it was made for. The pool keeps each statement's generic plan for the life of its
 * connection (PrismaService); PostgreSQL makes it again only when the statistics of a table it
 * reads change. With autovacuum off or behind, a plan made on an empty table stays, and on an
 * empty table every plan costs the same: measured, a reservation lookup by step id planned there
 * read every reservation of its project, on every run, and the settlement of step events (the
 * same shape as ingest's) read the whole table.
 *
 * A table is analyzed once the rows changed since its last statistics pass autovacuum's own
 * default threshold (50 rows plus 10% of the table), as autoanalyze would: small tables early,
 * large ones rarely. Leaf tables only (the log's monthly partitions one by one, as autoanalyze
 * does). Where autovacuum runs, this usually finds nothing to do.
 */
export class TableStatistics {
  constructor(private readonly prisma: PrismaService) {}

  async refresh(): Promise<AnalyzedTable[]> {
    const { rows } = await this.prisma.pool.query<{ table: string; changed: string }>(
      `SELECT s.relname AS table, s.n_mod_since_analyze::text AS changed
         FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
        WHERE s.schemaname = current_schema() AND c.relkind = 'r'
          AND s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0)
        ORDER BY s.n_mod_since_analyze DESC`,
    );
    const analyzed: AnalyzedTable[] = [];
    for (const r of rows) {
      // One table at a time: each ANALYZE is its own short transaction, and a table dropped
      // meanwhile (retention detaching a month) is skipped, not a failure of the others.
      const done = await this.prisma.pool
        .query(`ANALYZE ${quoteIdent(r.table)}`)
        .then(() => true)
        .catch((err: { code?: string }) => {
          if (err.code === '42P01') return false;
          throw err;
        });
      if (done) analyzed.push({ table: r.table, changedRows: Number(r.changed) });
    }
    return analyzed;
  }
}

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;
