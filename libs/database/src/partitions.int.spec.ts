import { ownDatabase } from '../../../test/support/own-database';
import { migrationsDir } from './migrate';
import { EventPartitions } from './partitions';
import { PrismaService } from './prisma.service';

const at = (iso: string) => Date.parse(iso);

/**
 * Which monthly partition of the log holds a range of occurredAt, for statements that read that
 * range by the partition's name. Its own database, so that the months that exist are the spec's.
 */
describe('EventPartitions.partitionOf (real PostgreSQL)', () => {
  const db = ownDatabase('partitions');
  let prisma: PrismaService;

  beforeAll(async () => {
    await db.create(migrationsDir());
    prisma = new PrismaService(db.url, 1);
    await prisma.pool.query(`SELECT ensure_event_partition('2026-03-15T00:00:00Z'::timestamptz)`);
  }, 60_000);
  afterAll(async () => {
    await prisma?.onModuleDestroy();
    await db.drop();
  });

  it('names a month only once it is known to exist, and only for a range inside that month', async () => {
    const partitions = new EventPartitions(prisma);
    // Not listed yet: the caller reads the parent (and a listing starts in the background).
    expect(partitions.partitionOf(at('2026-03-02T10:00:00Z'), at('2026-03-02T11:00:00Z'))).toBeUndefined();
    await partitions.list();
    expect(partitions.partitionOf(at('2026-03-02T10:00:00Z'), at('2026-03-02T11:00:00Z'))).toBe('events_2026_03');
    // The last millisecond of the month is in it; a range past it is not in one partition.
    expect(partitions.partitionOf(at('2026-03-31T23:30:00Z'), at('2026-04-01T00:00:00Z'))).toBe('events_2026_03');
    expect(partitions.partitionOf(at('2026-03-31T23:30:00Z'), at('2026-04-01T00:00:00.001Z'))).toBeUndefined();
    // A month without a partition (nothing was ever recorded in it), an open or empty range: the parent.
    expect(partitions.partitionOf(at('2026-05-02T10:00:00Z'), at('2026-05-02T11:00:00Z'))).toBeUndefined();
    expect(partitions.partitionOf(at('2026-03-02T10:00:00Z'), Infinity)).toBeUndefined();
    expect(partitions.partitionOf(at('2026-03-02T10:00:00Z'), at('2026-03-02T10:00:00Z'))).toBeUndefined();
    // A month this process made exists from then on, without a listing.
    await partitions.ensureFor([new Date('2026-05-20T00:00:00Z')]);
    expect(partitions.partitionOf(at('2026-05-02T10:00:00Z'), at('2026-05-02T11:00:00Z'))).toBe('events_2026_05');
  });

  it('a listing that fails leaves the parent to be read', async () => {
    const down = new PrismaService('postgresql://postgres@127.0.0.1:1/nowhere', 1);
    try {
      const partitions = new EventPartitions(down);
      await partitions.list();
      expect(partitions.partitionOf(at('2026-03-02T10:00:00Z'), at('2026-03-02T11:00:00Z'))).toBeUndefined();
    } finally {
      await down.onModuleDestroy();
    }
  });
});
