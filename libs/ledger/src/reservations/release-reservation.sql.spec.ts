import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { writeGuardOutcome } from '../check-guard/sql/guard-batch.sql';
import { newReservation } from '../budgets/new-reservation.fixture';
import { closeReservations, readReservation, readReservationContexts } from './release-reservation.sql';
import { ReservationsService } from './reservations.service';

describe('reservation statements (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const reserve = (project: string, id: string, expiresAt: Date, scopeKeys = ['resource:r1', 'user:u1']) =>
    writeGuardOutcome(prisma.sql, project, [newReservation(id, { scopeKeys, expiresAt })], []);
  const released = (project: string) =>
    prisma.sql.query<{ event_id: string; reservation_id: string; data: unknown }>(
      `SELECT event_id, reservation_id, data FROM events WHERE project_id = $1 AND type = 'ReservationReleased' ORDER BY event_id`,
      project,
    );
  const holds = (project: string) =>
    prisma.sql.query<{ scope_key: string; reservation_id: string }>(
      'SELECT scope_key, reservation_id FROM reservation_holds WHERE project_id = $1 ORDER BY scope_key, reservation_id',
      project,
    );
  const inAMinute = () => new Date(Date.now() + 60_000);
  // Reservation ids are unique across projects: each test names its own.
  let rsv: (name: string) => string;
  beforeEach(() => {
    const run = randomUUID().slice(0, 8);
    rsv = (name) => `rsv_${name}_${run}`;
  });

  it('releases one reservation: status and time, its holds gone in every scope, one ReservationReleased with what it held', async () => {
    const project = `p-${randomUUID()}`;
    await reserve(project, rsv('a'), inAMinute());
    await reserve(project, rsv('b'), inAMinute());
    expect(await closeReservations(prisma.sql, { projectId: project, id: rsv('a') }, 'released')).toEqual([
      { id: rsv('a'), project_id: project },
    ]);
    expect(await readReservation(prisma.sql, project, rsv('a'))).toEqual({
      id: rsv('a'),
      status: 'released',
      closedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(await readReservation(prisma.sql, project, rsv('b'))).toEqual({
      id: rsv('b'),
      status: 'open',
      closedAt: null,
    });
    expect(await holds(project)).toEqual([
      { scope_key: 'resource:r1', reservation_id: rsv('b') },
      { scope_key: 'user:u1', reservation_id: rsv('b') },
    ]);
    expect(await released(project)).toEqual([
      {
        event_id: `tg:reservation:${rsv('a')}:released`,
        reservation_id: rsv('a'),
        data: { reason: 'released', costMicros: 4500, inputTokens: 1000, outputTokens: 200 },
      },
    ]);
  });

  it('a sweep never waits on a reservation another transaction is closing: it lapses the others, that one is left to its closer', async () => {
    const project = `p-${randomUUID()}`;
    // y expires first: a sweep in expiry order met it first, and waited on it holding x.
    await reserve(project, rsv('x'), new Date(Date.now() - 1_000));
    await reserve(project, rsv('y'), new Date(Date.now() - 2_000));
    const closer = await prisma.pool.connect();
    try {
      await closer.query('BEGIN');
      await closer.query('SELECT id FROM reservations WHERE project_id = $1 AND id = $2 FOR UPDATE', [
        project,
        rsv('y'),
      ]);
      const swept = await prisma.transaction(
        (tx) =>
          closeReservations(tx, { expiredBefore: new Date(), expiredAfter: new Date(Date.now() - 60_000) }, 'lapsed'),
        2_000,
      );
      expect(swept.filter((r) => r.project_id === project)).toEqual([{ id: rsv('x'), project_id: project }]);
    } finally {
      await closer.query('ROLLBACK');
      closer.release();
    }
    expect((await readReservation(prisma.sql, project, rsv('y')))?.closedAt).toBeNull();
    expect(await holds(project)).toEqual([
      { scope_key: 'resource:r1', reservation_id: rsv('y') },
      { scope_key: 'user:u1', reservation_id: rsv('y') },
    ]);
  });

  it('closing twice changes nothing and logs nothing more', async () => {
    const project = `p-${randomUUID()}`;
    await reserve(project, rsv('a'), inAMinute());
    await closeReservations(prisma.sql, { projectId: project, id: rsv('a') }, 'released');
    const before = await readReservation(prisma.sql, project, rsv('a'));
    expect(await closeReservations(prisma.sql, { projectId: project, id: rsv('a') }, 'released')).toEqual([]);
    expect(await closeReservations(prisma.sql, { projectId: project, id: rsv('a') }, 'lapsed')).toEqual([]);
    expect(await readReservation(prisma.sql, project, rsv('a'))).toEqual(before);
    expect((await released(project)).length).toBe(1);
  });

  it('releases only within its project', async () => {
    const project = `p-${randomUUID()}`;
    await reserve(project, rsv('a'), inAMinute());
    expect(await closeReservations(prisma.sql, { projectId: `p-${randomUUID()}`, id: rsv('a') }, 'released')).toEqual(
      [],
    );
    expect(await readReservation(prisma.sql, project, rsv('a'))).toMatchObject({ status: 'open' });
  });

  it('lapses the reservations expired before a time, of every project, and only those', async () => {
    const [p1, p2] = [`p-${randomUUID()}`, `p-${randomUUID()}`];
    const t = Date.now();
    await reserve(p1, rsv('old'), new Date(t - 2000));
    await reserve(p2, rsv('old2'), new Date(t - 1000));
    await reserve(p1, rsv('new'), new Date(t + 60_000));
    const lapsed = await closeReservations(prisma.sql, { expiredBefore: new Date(t) }, 'lapsed');
    expect(
      lapsed
        .filter((r) => r.project_id === p1 || r.project_id === p2)
        .sort((a, b) => a.project_id.localeCompare(b.project_id)),
    ).toEqual(
      [
        { id: rsv('old'), project_id: p1 },
        { id: rsv('old2'), project_id: p2 },
      ].sort((a, b) => a.project_id.localeCompare(b.project_id)),
    );
    expect(await readReservation(prisma.sql, p1, rsv('old'))).toMatchObject({ status: 'lapsed' });
    expect(await readReservation(prisma.sql, p1, rsv('new'))).toMatchObject({ status: 'open' });
    expect((await released(p2)).map((e) => e.data)).toEqual([
      { reason: 'lapsed', costMicros: 4500, inputTokens: 1000, outputTokens: 200 },
    ]);
    expect(await holds(p1)).toEqual([
      { scope_key: 'resource:r1', reservation_id: rsv('new') },
      { scope_key: 'user:u1', reservation_id: rsv('new') },
    ]);
  });

  it('reads an open reservation past its expiry as lapsed before the sweeper ran; an unknown one as null', async () => {
    const project = `p-${randomUUID()}`;
    await reserve(project, rsv('a'), new Date(Date.now() - 1));
    expect(await readReservation(prisma.sql, project, rsv('a'))).toEqual({
      id: rsv('a'),
      status: 'lapsed',
      closedAt: null,
    });
    expect(await readReservation(prisma.sql, project, rsv('none'))).toBeNull();
  });

  it('reads the scope ids each named reservation was made for', async () => {
    const project = `p-${randomUUID()}`;
    await reserve(project, rsv('a'), inAMinute());
    await reserve(project, rsv('b'), inAMinute(), ['thread:th1']);
    const contexts = await readReservationContexts(prisma.sql, project, [rsv('a'), rsv('b'), rsv('none')]);
    expect(contexts).toEqual(
      new Map([
        [rsv('a'), ['resource:r1', 'user:u1', 'run:t1']],
        [rsv('b'), ['thread:th1', 'run:t1']],
      ]),
    );
    expect(await readReservationContexts(prisma.sql, project, [])).toEqual(new Map());
  });
});

/**
 * The sweeper runs every 30 s. Every reservation a step settled or the sweeper lapsed leaves its
 * entry in the index of open reservations' expiries until VACUUM (autovacuum is off on this
 * machine, and late on a busy one): a sweep that looks at every expired entry walks the whole
 * history of the guard, each time.
 */
describe('the reservation sweep (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 1);
  const partitions = new EventPartitions(prisma);
  beforeAll(() => partitions.ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const pagesRead = async () => {
    await prisma.pool.query('SELECT pg_stat_force_next_flush()');
    const { rows } = await prisma.pool.query(
      `SELECT (heap_blks_hit + heap_blks_read + idx_blks_hit + idx_blks_read)::int AS n FROM pg_statio_user_tables WHERE relname = 'reservations'`,
    );
    return rows[0].n as number;
  };

  it('looks at the reservations that expired since its last sweep, not at every one it lapsed before', async () => {
    const project = `p-${randomUUID()}`;
    const sweeper = new ReservationsService(prisma, partitions);
    // Reservations expiring `from` ms from now, one a millisecond earlier than the one before.
    const expiring = async (n: number, tag: string, from: number) =>
      prisma.pool.query(
        `INSERT INTO reservations (id, project_id, step_id, scope_keys, context_keys, cost_micros, cost_unit, input_tokens, output_tokens, created_at, expires_at)
         SELECT 'rsv-sweep-' || $2 || '-' || i, $1, 'step-' || $2 || '-' || i, '{}', '{}', 4500, 'USD', 1000, 200, now(), now() + ($4::int - i) * interval '1 millisecond'
           FROM generate_series(1, $3::int) AS i`,
        [project, tag, n, from],
      );
    await expiring(30_000, 'old', -1_000);
    expect(await sweeper.sweep()).toBeGreaterThanOrEqual(30_000);
    // Another sweep or two may step over the entries it left once.
    await sweeper.sweep();
    // Made after that sweep, as reservations are: they expire after it.
    await expiring(5, 'new', 300);
    await new Promise((r) => setTimeout(r, 400));
    const before = await pagesRead();
    expect(await sweeper.sweep(new Date())).toBe(5);
    expect(await sweeper.sweep(new Date())).toBe(0);
    expect((await pagesRead()) - before).toBeLessThan(100);
    const { rows } = await prisma.pool.query(
      `SELECT status, count(*)::int AS n FROM reservations WHERE project_id = $1 GROUP BY status`,
      [project],
    );
    expect(rows).toEqual([{ status: 'lapsed', n: 30_005 }]);
  }, 60_000);
});
