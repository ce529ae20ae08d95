import {
  EventPartitions,
  LOG_START,
  PrismaService,
  checkpointAfter,
  readEventsAfter,
  type Checkpoint,
} from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { TEST_DATABASE_URL } from '../support/env';

/** Inserts one bare event row for `projectId` through an open pg client (inside its transaction). */
async function insertRow(client: Client, projectId: string, eventId: string, occurredAt = new Date()): Promise<bigint> {
  const { rows } = await client.query<{ position: string }>(
    `INSERT INTO events (project_id, event_id, type, occurred_at) VALUES ($1, $2, 'StepUsageRecorded', $3) RETURNING position::text`,
    [projectId, eventId, occurredAt],
  );
  return BigInt(rows[0].position);
}

describe('the event log (real PostgreSQL)', () => {
  let prisma: PrismaService;
  let a: Client;
  let b: Client;

  beforeAll(async () => {
    prisma = new PrismaService(TEST_DATABASE_URL, 4);
    await new EventPartitions(prisma).ensureAhead(new Date(), 1);
    a = new Client({ connectionString: TEST_DATABASE_URL });
    b = new Client({ connectionString: TEST_DATABASE_URL });
    await Promise.all([a.connect(), b.connect()]);
  });
  afterAll(async () => {
    await Promise.all([a.end(), b.end()]);
    await prisma.onModuleDestroy();
  });

  async function readAll(projectId: string, from: Checkpoint = LOG_START) {
    const events = await readEventsAfter(prisma, from, 1000, projectId);
    return { ids: events.map((e) => e.eventId), next: checkpointAfter(from, events) };
  }

  /**
   * Reads once the log is readable past our transactions. Transaction ids are cluster-wide, so a
   * long transaction in any database of this PostgreSQL (another test run, a benchmark) holds the
   * reader back until it ends: wait for that, then read once and compare exactly.
   */
  async function readSettled(projectId: string, from: Checkpoint = LOG_START) {
    const [{ mine }] = await prisma.$queryRawUnsafe<{ mine: string }[]>(
      'SELECT max(tx)::text AS mine FROM events WHERE project_id = $1',
      projectId,
    );
    for (let i = 0; i < 300; i++) {
      const [{ ok }] = await prisma.$queryRawUnsafe<{ ok: boolean }[]>(
        'SELECT $1::xid8 < pg_snapshot_xmin(pg_current_snapshot()) AS ok',
        mine,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return readAll(projectId, from);
  }

  it('never skips an event whose transaction commits after a later position was committed', async () => {
    const project = `p-${randomUUID()}`;
    await a.query('BEGIN');
    const early = await insertRow(a, project, 'early'); // takes the lower position, commits last
    await b.query('BEGIN');
    const late = await insertRow(b, project, 'late');
    expect(late).toBeGreaterThan(early);
    await b.query('COMMIT');

    // 'late' is committed, but 'early' is still in flight: a reader must wait for both,
    // otherwise its checkpoint would pass 'early' before it commits.
    const first = await readAll(project);
    expect(first.ids).toEqual([]);

    await a.query('COMMIT');
    const second = await readSettled(project, first.next);
    expect(second.ids).toEqual(['early', 'late']);

    // Resuming from the checkpoint returns nothing twice.
    expect((await readAll(project, second.next)).ids).toEqual([]);
  });

  it('reads in commit order: a transaction that started later but committed first is not read before the earlier one', async () => {
    const project = `p-${randomUUID()}`;
    await a.query('BEGIN');
    await a.query('SELECT pg_current_xact_id()'); // a takes the older transaction id
    await b.query('BEGIN');
    await insertRow(b, project, 'b1');
    await b.query('COMMIT');
    const seen = await readAll(project);
    expect(seen.ids).toEqual([]); // b1 waits while the older transaction a is open
    await insertRow(a, project, 'a1');
    await a.query('COMMIT');
    const after = await readSettled(project, seen.next);
    expect(after.ids).toEqual(['a1', 'b1']);
  });

  it('does not return rolled-back events', async () => {
    const project = `p-${randomUUID()}`;
    await a.query('BEGIN');
    await insertRow(a, project, 'gone');
    await a.query('ROLLBACK');
    await insertRow(b, project, 'kept');
    expect((await readSettled(project)).ids).toEqual(['kept']);
  });

  it('pages through the log with a limit without losing or repeating events', async () => {
    const project = `p-${randomUUID()}`;
    for (let i = 0; i < 25; i++) await insertRow(a, project, `e${i}`);
    await readSettled(project);
    const seen: string[] = [];
    let cp = LOG_START;
    for (;;) {
      const page = await readEventsAfter(prisma, cp, 7, project);
      if (!page.length) break;
      seen.push(...page.map((e) => e.eventId));
      cp = checkpointAfter(cp, page);
    }
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => `e${i}`));
  });

  it('creates monthly partitions ahead and on demand, idempotently, also when racing', async () => {
    const partitions = new EventPartitions(prisma);
    const names = await partitions.ensureAhead(new Date(Date.UTC(2031, 10, 20)), 2);
    expect(names).toEqual(['events_2031_11', 'events_2031_12', 'events_2032_01']);
    const racers = Array.from({ length: 5 }, () =>
      new EventPartitions(prisma).ensureFor([new Date(Date.UTC(2011, 1, 3))]),
    );
    await Promise.all(racers);
    const rows = await prisma.$queryRawUnsafe<{ name: string; bounds: string }[]>(
      `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bounds
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'events'::regclass AND c.relname IN ('events_2011_02', 'events_2031_12')
        ORDER BY 1`,
    );
    expect(rows).toEqual([
      { name: 'events_2011_02', bounds: "FOR VALUES FROM ('2011-02-01 00:00:00+00') TO ('2011-03-01 00:00:00+00')" },
      { name: 'events_2031_12', bounds: "FOR VALUES FROM ('2031-12-01 00:00:00+00') TO ('2032-01-01 00:00:00+00')" },
    ]);
  });
});
