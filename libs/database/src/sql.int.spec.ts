import { TEST_DATABASE_URL } from '../../../test/support/env';
import { PrismaService } from './prisma.service';
import { inlined } from './sql';

/**
 * Statements with values sent inside a transaction's simple queries (its opening, its COMMIT):
 * what goes in comes out, byte for byte, and each is prepared once per connection.
 */
describe('executable statements in a transaction (real PostgreSQL)', () => {
  // One connection, so that every transaction below runs on the same one.
  const prisma = new PrismaService(TEST_DATABASE_URL, 1);
  afterAll(() => prisma.onModuleDestroy());

  const ECHO = `SELECT $1::text AS t, $2::text[] AS a, $3::timestamptz[] AS ts, $4::bigint AS n, $5::int[] AS ints, $6::timestamptz AS at, $7::boolean AS b`;
  const tricky = `it's "quoted" \\ back\\slash, {braces}, commas; NULL and ünïcødé 💸`;
  const params = [
    tricky,
    [tricky, '', 'NULL', 'null', 'Null', null, ',', '"', '\\', '}', ' padded ', 'plain:id_1.5+x-y', '-1'],
    ['2026-12-01T10:00:00.123Z', 'infinity', '-infinity'],
    9_007_199_254_740_993n,
    [1, -2, 3],
    new Date('2026-12-01T10:00:00.456Z'),
    true,
  ] as const;

  const prepared = async () =>
    Number(
      (await prisma.pool.query(`SELECT count(*) FROM pg_prepared_statements WHERE from_sql AND name LIKE 'tx\\_%'`))
        .rows[0].count,
    );

  it('gives back every value as sent, in the opening and with COMMIT, prepared once per connection', async () => {
    const before = await prepared();
    const [opened, committed] = await prisma.transaction(
      async (tx, rows) => [rows, await tx.commitWith({ text: ECHO, params })],
      5_000,
      ['SELECT 1 AS one', { text: ECHO, params }],
    );
    expect(opened[0]).toEqual([{ one: 1 }]);
    for (const rows of [opened[1], committed]) {
      expect(rows).toEqual([
        {
          t: tricky,
          a: [tricky, '', 'NULL', 'null', 'Null', null, ',', '"', '\\', '}', ' padded ', 'plain:id_1.5+x-y', '-1'],
          ts: [new Date('2026-12-01T10:00:00.123Z'), Infinity, -Infinity],
          n: '9007199254740993',
          ints: [1, -2, 3],
          at: new Date('2026-12-01T10:00:00.456Z'),
          b: true,
        },
      ]);
    }
    expect(await prepared()).toBe(before + 1);
    // The next transaction on the connection runs it without preparing it again.
    await prisma.transaction(async (tx) => tx.commitWith({ text: ECHO, params }));
    expect(await prepared()).toBe(before + 1);
  });

  it('inlines the same values byte for byte into a statement planned on every run, preparing nothing', async () => {
    const [asPrepared] = await prisma.transaction(async (_tx, opened) => opened, 5_000, [{ text: ECHO, params }]);
    const before = await prepared();
    const [asInlined] = await prisma.transaction(async (_tx, opened) => opened, 5_000, [
      inlined({ text: ECHO, params }),
    ]);
    expect(asInlined).toEqual(asPrepared);
    expect(await prepared()).toBe(before);
    expect(() => inlined({ text: 'SELECT $1, $2', params: ['a'] })).toThrow('no value for $2');
  });

  it('rolls back on a failure, and the connection goes on working', async () => {
    await prisma.pool.query('CREATE TABLE IF NOT EXISTS sql_spec_rows (v text PRIMARY KEY)');
    const INSERT = 'INSERT INTO sql_spec_rows (v) VALUES ($1) RETURNING v';
    await expect(
      prisma.transaction(async (tx) => {
        await tx.query(INSERT, 'kept?');
        return tx.commitWith({ text: 'SELECT 1 / $1::int AS x', params: [0] });
      }),
    ).rejects.toThrow(/division by zero/);
    // A failure in the very query that prepared the statement: the connection is replaced.
    await expect(
      prisma.transaction(async () => undefined, 5_000, [{ text: 'SELECT 1 / $1::int AS y', params: [0] }]),
    ).rejects.toThrow(/division by zero/);
    const rows = await prisma.transaction(async (tx) => tx.commitWith({ text: INSERT, params: ['after'] }));
    expect(rows).toEqual([{ v: 'after' }]);
    expect((await prisma.pool.query('SELECT v FROM sql_spec_rows ORDER BY v')).rows).toEqual([{ v: 'after' }]);
    await prisma.pool.query('DROP TABLE sql_spec_rows');
  });

  it('runs statements as one transaction in one round trip: settings stay local, a failure leaves nothing', async () => {
    const rows = await prisma.oneTrip([
      'SET LOCAL enable_seqscan = off',
      { text: 'SELECT $1::int + 1 AS n, current_setting($2) AS seq', params: [41, 'enable_seqscan'] },
    ]);
    expect(rows).toEqual([[], [{ n: 42, seq: 'off' }]]);
    expect((await prisma.pool.query('SHOW enable_seqscan')).rows).toEqual([{ enable_seqscan: 'on' }]);

    await prisma.pool.query('CREATE TABLE IF NOT EXISTS sql_spec_trip (v text PRIMARY KEY)');
    await expect(
      prisma.oneTrip([
        { text: 'INSERT INTO sql_spec_trip (v) VALUES ($1)', params: ['gone'] },
        { text: 'SELECT 1 / $1::int', params: [0] },
      ]),
    ).rejects.toThrow(/division by zero/);
    expect((await prisma.pool.query('SELECT count(*)::int AS n FROM sql_spec_trip')).rows).toEqual([{ n: 0 }]);
    await prisma.pool.query('DROP TABLE sql_spec_trip');
  });

  it('survives a checked-out connection ending between its queries (PostgreSQL restarted), and goes on', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    // Jest keeps its own handler; ours records what would have crashed a service process.
    const listeners = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', onUncaught);
    const other = new PrismaService(TEST_DATABASE_URL, 1);
    try {
      const client = await prisma.pool.connect();
      const { rows } = await client.query('SELECT pg_backend_pid() AS pid');
      // Between two queries of a transaction's work: what an administrator's shutdown does to it.
      await other.pool.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
      await new Promise((r) => setTimeout(r, 200));
      await expect(client.query('SELECT 1')).rejects.toThrow();
      client.release();
      expect(uncaught).toEqual([]);
      expect((await prisma.pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
      for (const l of listeners) process.on('uncaughtException', l);
      await other.onModuleDestroy();
    }
  });
});
