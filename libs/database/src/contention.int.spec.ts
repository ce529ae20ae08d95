import { Client } from 'pg';
import { TEST_DATABASE_URL } from '../../../test/support/env';
import { CONTENTION_ATTEMPTS } from './contention';
import { PrismaService } from './prisma.service';

/**
 * A transaction PostgreSQL picks as a deadlock's victim is run again from BEGIN, and its work
 * lands once; one that keeps losing is given up after CONTENTION_ATTEMPTS runs, with
 * PostgreSQL's error (which the service answers as busy).
 */
describe('transactions rolled back for contention (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  const other = new Client({ connectionString: TEST_DATABASE_URL });
  const table = `contention_${process.pid}`;

  beforeAll(async () => {
    await other.connect();
    await other.query(`CREATE TABLE ${table} (k text PRIMARY KEY, n int NOT NULL)`);
  });
  beforeEach(() => other.query(`TRUNCATE ${table}; INSERT INTO ${table} VALUES ('a', 0), ('b', 0)`));
  afterAll(async () => {
    await other.query(`DROP TABLE ${table}`);
    await other.end();
    await prisma.onModuleDestroy();
  });

  /**
   * Our transaction takes row a then b; the other connection takes b then a, and waits first, with
   * a long deadlock_timeout: ours, whose wait closes the cycle and which checks after 20 ms, is the
   * victim. The other commits once ours has rolled back (awaited by the test, after it).
   */
  let theirs: Promise<unknown>[] = [];
  async function deadlockOnce(tx: { query: (text: string) => Promise<unknown> }) {
    await tx.query(`SET LOCAL deadlock_timeout = '20ms'`);
    await other.query('BEGIN');
    await other.query(`SET LOCAL deadlock_timeout = '10s'`);
    await other.query(`UPDATE ${table} SET n = n + 100 WHERE k = 'b'`);
    await tx.query(`UPDATE ${table} SET n = n + 1 WHERE k = 'a'`);
    theirs.push(other.query(`UPDATE ${table} SET n = n + 100 WHERE k = 'a'`).then(() => other.query('COMMIT')));
    await new Promise((r) => setTimeout(r, 100));
    await tx.query(`UPDATE ${table} SET n = n + 1 WHERE k = 'b'`);
  }
  afterEach(async () => {
    await Promise.all(theirs);
    theirs = [];
  });

  it('runs the victim again, and its work lands once', async () => {
    let runs = 0;
    await prisma.transaction(async (tx) => {
      runs += 1;
      if (runs === 1) await deadlockOnce(tx);
      else await tx.query(`UPDATE ${table} SET n = n + 1 WHERE k IN ('a', 'b')`);
    });
    expect(runs).toBe(2);
    await Promise.all(theirs);
    const rows = await other.query(`SELECT k, n FROM ${table} ORDER BY k`);
    expect(rows.rows).toEqual([
      { k: 'a', n: 101 },
      { k: 'b', n: 101 },
    ]);
  });

  it('gives up after a bounded number of runs, with the deadlock error', async () => {
    let runs = 0;
    const failing = prisma.transaction(async (tx) => {
      runs += 1;
      await deadlockOnce(tx);
    });
    await expect(failing).rejects.toMatchObject({ code: '40P01' });
    expect(runs).toBe(CONTENTION_ATTEMPTS);
  });
});
