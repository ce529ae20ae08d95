import type { PrismaService } from './prisma.service';

/** The UTC month start of `at`, as the partition bound for it. */
export function monthOf(at: Date): string {
  return `${at.getUTCFullYear()}-${String(at.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** How long the list of the log's partitions is trusted before a read asks for it again. */
const LISTED_FOR_MS = 10 * 60_000;

/**
 * Keeps track of which monthly partitions of `events` exist, creating the missing ones before an
 * insert needs them. The cache only saves a round trip: ensure_event_partition is idempotent.
 */
export class EventPartitions {
  /** Months this process ensured: their partitions exist. */
  private readonly known = new Set<string>();
  /** Months whose partitions were attached when the log's partitions were last listed. */
  private listed = new Set<string>();
  private listedAt = -Infinity;
  private listing: Promise<void> | undefined;

  constructor(private readonly prisma: PrismaService) {}

  /**
   * The partition that holds every event that occurred in [from, to) — the range lies in one
   * month, whose partition is known to exist — so that a statement reading that range can name
   * it and be planned for it alone: planned over the parent, a generic plan covers every month of
   * the log (with 14 months, 37–57 ms on a new connection and 6–7 ms again on every connection
   * whenever a statistics pass invalidates the plan; 0.7–1.6 ms naming the month). Undefined
   * otherwise: read the parent. Partitions are only ever dropped
   * past the retention, which keeps every month a guard window reaches; a month not known yet is
   * found by the next listing, made in the background at most every 10 minutes.
   */
  partitionOf(from: number, to: number): string | undefined {
    if (!(Number.isFinite(from) && Number.isFinite(to) && from < to)) return undefined;
    const month = monthOf(new Date(from));
    if (month !== monthOf(new Date(to - 1))) return undefined;
    if (this.known.has(month) || this.listed.has(month)) return `events_${month.replace('-', '_')}`;
    if (Date.now() - this.listedAt > LISTED_FOR_MS) void this.list();
    return undefined;
  }

  /** Lists the attached monthly partitions of the log (one listing at a time; a failure is retried later). */
  list(): Promise<void> {
    this.listing ??= this.prisma.pool
      .query<{ name: string }>(
        `SELECT c.relname::text AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent = 'events'::regclass AND NOT i.inhdetachpending`,
      )
      .then(({ rows }) => {
        this.listed = new Set(
          rows.flatMap((r) => {
            const m = /^events_(\d{4})_(\d{2})$/.exec(r.name);
            return m ? [`${m[1]}-${m[2]}`] : [];
          }),
        );
      })
      .catch(() => undefined)
      .finally(() => {
        this.listedAt = Date.now();
        this.listing = undefined;
      });
    return this.listing;
  }

  async ensureFor(dates: Iterable<Date>): Promise<void> {
    const missing = new Map<string, Date>();
    for (const d of dates) {
      const m = monthOf(d);
      if (!this.known.has(m) && !missing.has(m)) missing.set(m, d);
    }
    for (const [m, d] of missing) {
      await this.prisma.$queryRaw`SELECT ensure_event_partition(${d}::timestamptz)`;
      this.known.add(m);
    }
  }

  /** Creates this month's partition and `monthsAhead` after it. */
  async ensureAhead(now: Date, monthsAhead: number): Promise<string[]> {
    const names: string[] = [];
    for (let i = 0; i <= monthsAhead; i++) {
      const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + i, 15));
      const rows = await this.prisma.$queryRaw<
        { name: string }[]
      >`SELECT ensure_event_partition(${d}::timestamptz) AS name`;
      names.push(rows[0].name);
      this.known.add(monthOf(d));
    }
    return names;
  }
}
