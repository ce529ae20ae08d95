import { Logger } from '@nestjs/common';
import type { PrismaService } from './prisma.service';

/** The first instant that is kept: the UTC start of `now`'s month, `months` months back. */
export function retentionCutoff(now: Date, months: number): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - months, 1));
}

export interface EventPartition {
  name: string;
  from: Date;
  to: Date;
  /** A DETACH … CONCURRENTLY that was interrupted (it must be finalized). */
  detachPending: boolean;
  /** Still a partition of events (false: a table detached by a run that stopped before dropping it). */
  attached: boolean;
}

export interface RetentionResult {
  cutoff: string;
  /** Partitions detached and dropped by this run. */
  dropped: string[];
  /** Partitions past the retention that the rollups do not cover yet (left for a later run). */
  waiting: string[];
  eventIdsDeleted: number;
  usageCountersDeleted: number;
}

const PARTITION_NAME = /^events_\d{4}_\d{2}$/;

/** The monthly partitions of `events` with their bounds, oldest first. */
export async function listEventPartitions(prisma: PrismaService): Promise<EventPartition[]> {
  const rows = await prisma.$queryRawUnsafe<{ name: string; from: Date | null; to: Date | null; pending: boolean }[]>(
    `SELECT name, (b)[1]::timestamptz AS "from", (b)[2]::timestamptz AS "to", pending
       FROM (SELECT c.relname::text AS name, i.inhdetachpending AS pending,
                    regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']+)''\\) TO \\(''([^'']+)''\\)') AS b
               FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
              WHERE i.inhparent = 'events'::regclass) p`,
  );
  return rows
    .filter((r): r is { name: string; from: Date; to: Date; pending: boolean } => r.from !== null && r.to !== null)
    .map((r) => ({ name: r.name, from: r.from, to: r.to, detachPending: r.pending, attached: true }))
    .sort((a, b) => a.from.getTime() - b.from.getTime());
}

/**
 * Retention of the event log by whole months: a monthly partition that ended before the cutoff is
 * detached (CONCURRENTLY: ingest and the guard keep running) and dropped — but only once the
 * projection named `coveredBy` (the metric rollups) has read every row of it, so dashboards keep
 * the history the log no longer has. Then the other tables that hold event history lose the same
 * months: `event_ids` (idempotency keys) and `usage_counters`' hour and day buckets (a run's
 * all-time row is kept: a run's budget counts all of it).
 *
 * The cutoff is at least 13 months back (TOLLGATE_RETENTION_MONTHS), so every 365-day guard window
 * still reads only months that are kept: the guard stays exact.
 */
export class EventRetention {
  private readonly logger = new Logger('retention');

  constructor(private readonly prisma: PrismaService) {}

  async apply(now: Date, months: number, coveredBy: string): Promise<RetentionResult> {
    if (!Number.isInteger(months) || months < 13)
      throw new Error(`retention must be at least 13 months (got ${months})`);
    const cutoff = retentionCutoff(now, months);
    const result: RetentionResult = {
      cutoff: cutoff.toISOString(),
      dropped: [],
      waiting: [],
      eventIdsDeleted: 0,
      usageCountersDeleted: 0,
    };

    for (const p of [...(await this.orphans(cutoff)), ...(await listEventPartitions(this.prisma))]) {
      if (p.to.getTime() > cutoff.getTime()) continue;
      if (p.attached && !p.detachPending && !(await this.covered(p.name, coveredBy))) {
        result.waiting.push(p.name);
        continue;
      }
      if (p.attached) await this.detach(p);
      // Nothing can be inserted into a month this old (ingest refuses it), but check again on the
      // detached table before it is dropped: a row the rollups have not read goes back.
      if (!(await this.covered(p.name, coveredBy))) {
        await this.prisma.$executeRawUnsafe(
          `ALTER TABLE events ATTACH PARTITION ${ident(p.name)} FOR VALUES FROM ('${p.from.toISOString()}') TO ('${p.to.toISOString()}')`,
        );
        result.waiting.push(p.name);
        continue;
      }
      await this.prisma.$executeRawUnsafe(`DROP TABLE ${ident(p.name)}`);
      result.dropped.push(p.name);
      this.logger.log({ msg: 'event partition dropped', partition: p.name, cutoff: result.cutoff });
    }

    // The history of the months the log no longer has (all of it before the oldest partition left).
    const remaining = await listEventPartitions(this.prisma);
    const keptFrom = new Date(Math.min(cutoff.getTime(), remaining[0]?.from.getTime() ?? cutoff.getTime()));
    result.eventIdsDeleted = await this.prisma.$executeRawUnsafe(
      `DELETE FROM event_ids WHERE occurred_at < $1::timestamptz`,
      keptFrom,
    );
    result.usageCountersDeleted = await this.prisma.$executeRawUnsafe(
      `DELETE FROM usage_counters WHERE granularity IN ('h', 'd') AND bucket_start < $1::timestamptz`,
      keptFrom,
    );
    return result;
  }

  /** Whether the projection's checkpoint is past every row of the partition (or detached table). */
  private async covered(table: string, coveredBy: string): Promise<boolean> {
    const rows = await this.prisma.$queryRawUnsafe<{ uncovered: boolean | null }[]>(
      `SELECT EXISTS (SELECT 1 FROM ${ident(table)} e WHERE (e.tx, e.position) > (c.tx, c.position)) AS uncovered
         FROM projection_checkpoints c WHERE c.name = $1`,
      coveredBy,
    );
    return rows.length === 1 && rows[0].uncovered === false;
  }

  private async detach(p: EventPartition): Promise<void> {
    // CONCURRENTLY cannot run in a transaction; the pool's connection runs it alone. An interrupted
    // one leaves the partition "detach pending", which only FINALIZE completes.
    const client = await this.prisma.pool.connect();
    try {
      await client.query(
        `ALTER TABLE events DETACH PARTITION ${ident(p.name)} ${p.detachPending ? 'FINALIZE' : 'CONCURRENTLY'}`,
      );
    } finally {
      client.release();
    }
  }

  /** Months detached by a run that stopped before dropping (or re-attaching) them. */
  private async orphans(cutoff: Date): Promise<EventPartition[]> {
    const rows = await this.prisma.$queryRawUnsafe<{ name: string }[]>(
      `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind = 'r' AND NOT c.relispartition AND c.relname ~ '^events_[0-9]{4}_[0-9]{2}$'`,
    );
    return rows
      .map(({ name }) => {
        const from = new Date(Date.UTC(Number(name.slice(7, 11)), Number(name.slice(12, 14)) - 1, 1));
        return {
          name,
          from,
          to: new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth() + 1, 1)),
          detachPending: false,
          attached: false,
        };
      })
      .filter((p) => p.to.getTime() <= cutoff.getTime());
  }
}

function ident(name: string): string {
  if (!PARTITION_NAME.test(name)) throw new Error(`not an event partition name: ${name}`);
  return `"${name}"`;
}
