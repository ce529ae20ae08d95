import type { PrismaService } from './prisma.service';

/** The UTC month start of `at`, as the partition bound for it. */
export function monthOf(at: Date): string {
  return `${at.getUTCFullYear()}-${String(at.getUTCMonth() + 1).padStart(2, '0')}`;
}

/**
 * Keeps track of which monthly partitions of `events` exist, creating the missing ones before an
 * insert needs them. The cache only saves a round trip: ensure_event_partition is idempotent.
 */
export class EventPartitions {
  private readonly known = new Set<string>();

  constructor(private readonly prisma: PrismaService) {}

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
