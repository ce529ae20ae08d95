import { Injectable, Logger } from '@nestjs/common';
import { checkpointAfter, PrismaService, readLogRowsAfter, type Checkpoint, type LogRow } from '@tollgate/database';
import { foldRollups, ROLLUP_SELECT, type RollupCell } from './rollup-batch';
import {
  deleteEmptyRollups,
  lockCheckpoint,
  resetRollups,
  resolveDimensionIds,
  ROLLUP_PROJECTION,
  saveCheckpoint,
  upsertProjectRollups,
  upsertScopeRollups,
  type SqlClient,
} from './rollup-store.sql';

export interface CatchUpOptions {
  batchSize?: number;
  /** Stop after this long even if the log has more (the job re-enqueues itself). */
  maxMs?: number;
  /** Wait for the lock instead of leaving the work to the worker that holds it (replay). */
  waitForLock?: boolean;
  onBatch?: (events: number) => void;
}

export interface CatchUpResult {
  events: number;
  batches: number;
  /** The log had nothing more to read (below the oldest running transaction). */
  caughtUp: boolean;
  /** Another worker held the projection. */
  busy: boolean;
}

/** Dimension ids are stable (never deleted), so a process can remember them. */
const DIMENSION_CACHE_LIMIT = 200_000;

/**
 * The metric rollup projection: reads the log after its checkpoint with the commit-safe reader
 * and adds each batch to the rollups, and moves the checkpoint, in one transaction — a crash
 * between batches loses nothing and counts nothing twice. The checkpoint row's lock makes it
 * single-writer across worker processes.
 */
@Injectable()
export class MetricsProjector {
  private readonly logger = new Logger('metrics-projector');
  private readonly dimensionIds = new Map<string, bigint>();

  constructor(private readonly prisma: PrismaService) {}

  async catchUp(options: CatchUpOptions = {}): Promise<CatchUpResult> {
    const batchSize = options.batchSize ?? DEFAULT_BATCH;
    const deadline = Date.now() + (options.maxMs ?? Number.POSITIVE_INFINITY);
    const result: CatchUpResult = { events: 0, batches: 0, caughtUp: false, busy: false };
    // The next batch is read (and folded) on another connection while this one's rollups are
    // written: the read and the fold overlap the writes instead of following them.
    let ahead: ReadAhead | null = null;
    while (Date.now() < deadline) {
      const prefetched: ReadAhead | null = ahead;
      ahead = null;
      const read = await this.inTransaction((tx) =>
        this.projectBatch(tx, batchSize, options.waitForLock ?? false, prefetched, (after) => {
          if (Date.now() < deadline) ahead = this.readAhead(after, batchSize);
        }),
      );
      if (read === null) {
        result.busy = true;
        return result;
      }
      // Remember new dimension ids only once their transaction has committed.
      this.remember(read.newIds);
      if (read.events > 0) {
        result.events += read.events;
        result.batches += 1;
        options.onBatch?.(read.events);
      }
      if (read.events < batchSize) {
        result.caughtUp = true;
        return result;
      }
    }
    return result;
  }

  /** Rebuilds the rollups from position 0 into the live tables (see the note on replay in index.ts). */
  async replay(options: Omit<CatchUpOptions, 'waitForLock' | 'maxMs'> = {}): Promise<CatchUpResult> {
    await this.inTransaction(async (tx) => {
      await lockCheckpoint(tx, ROLLUP_PROJECTION, false);
      await resetRollups(tx, ROLLUP_PROJECTION);
    });
    this.logger.log({ msg: 'metric rollups reset for replay' });
    const total: CatchUpResult = { events: 0, batches: 0, caughtUp: false, busy: false };
    // Another worker may take some batches meanwhile: that is fine (they are counted once, under
    // the lock). Loop until the log is drained.
    for (;;) {
      const r = await this.catchUp({ ...options, waitForLock: true });
      total.events += r.events;
      total.batches += r.batches;
      if (r.caughtUp) return { ...total, caughtUp: true };
    }
  }

  /**
   * Runs `work` in one transaction on one connection of the pool. The batch loop talks to the pg
   * driver directly rather than through Prisma's raw queries: reading 10,000 log rows through
   * Prisma's value conversion took twice as long, and this loop is the projection's throughput.
   * The SQL is the same either way (SqlClient), and readLogRowsAfter is the commit-safe reader.
   */
  private async inTransaction<T>(work: (tx: SqlClient) => Promise<T>): Promise<T> {
    const client = await this.prisma.pool.connect();
    const tx: SqlClient = {
      $queryRawUnsafe: async <R>(sql: string, ...values: unknown[]) => (await client.query(sql, values)).rows as R,
      $executeRawUnsafe: async (sql: string, ...values: unknown[]) => (await client.query(sql, values)).rowCount ?? 0,
    };
    try {
      await client.query('BEGIN');
      // The rollups are a projection, rebuildable from the log, and the checkpoint moves in this
      // same transaction: a crash that loses its commit only leaves those events to be read again.
      // So the commit need not wait for the WAL flush (this transaction only).
      await client.query('SET LOCAL synchronous_commit = off');
      const result = await work(tx);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  /** The batch after `after`, read on a pooled connection of its own and folded as soon as it arrives. */
  private readAhead(after: Checkpoint, batchSize: number): ReadAhead {
    const db = poolSql(this.prisma);
    const batch = readRollupRows(db, after, batchSize).then(async (events) => {
      const cells = foldRollups(events.map((e) => e.row));
      // New dimension tuples are inserted ahead too, committed on their own: a tuple is only ever
      // added (ON CONFLICT DO NOTHING, never deleted), and its events are in the log already, so a
      // tuple whose rollups are not written yet lists nothing the log does not have.
      this.remember(await this.dimensionIdsFor(db, cells));
      return { events, cells };
    });
    batch.catch(() => undefined); // a failed read-ahead is read again in the transaction
    return { after, batch };
  }

  /**
   * One batch in the caller's transaction; null when another worker holds the projection. A
   * read-ahead is used only when it starts where the locked checkpoint stands (another worker may
   * have moved it meanwhile); `next` is told where this batch ends when a full one was read.
   */
  private async projectBatch(
    tx: SqlClient,
    batchSize: number,
    waitForLock: boolean,
    prefetched: ReadAhead | null,
    next: (after: Checkpoint) => void,
  ): Promise<{ events: number; newIds: Map<string, bigint> } | null> {
    const checkpoint = await lockCheckpoint(tx, ROLLUP_PROJECTION, !waitForLock);
    if (!checkpoint) return null;
    const ready =
      prefetched && prefetched.after.tx === checkpoint.tx && prefetched.after.position === checkpoint.position
        ? await prefetched.batch.catch(() => null)
        : null;
    const events = ready?.events ?? (await readRollupRows(tx, checkpoint, batchSize));
    if (events.length === 0) return { events: 0, newIds: new Map() };
    if (events.length === batchSize) next(checkpointAfter(checkpoint, events));
    const cells = ready?.cells ?? foldRollups(events.map((e) => e.row));
    const projectCells = cells.filter((c) => c.cube !== 'scope');
    const scopeCells = cells.filter((c) => c.cube === 'scope');
    // The project cubes' few tuples are nearly always known. Their upsert goes first, and while
    // PostgreSQL runs it the scope tuples are resolved on another connection (new ones committed
    // on their own, as the read-ahead does): two backends work at once instead of taking turns.
    // A scope tuple that is also a project one (an event without scope ids) was resolved in this
    // transaction: asked for again on another connection it would wait for this transaction's
    // uncommitted insert, which waits for it. A pool too small to spare a connection beside this
    // transaction and a read-ahead resolves them here, in turn.
    const freshLow = await this.dimensionIdsFor(tx, projectCells);
    const idOf = (cell: RollupCell, ids: Map<string, bigint>) => ids.get(dimKey(cell))!;
    const project = projectCells.map((cell) => ({ cell, dimsId: idOf(cell, freshLow) }));
    const projectWritten = upsertProjectRollups(tx, project);
    // Awaited below; this only keeps an early failure from being an unhandled rejection meanwhile.
    projectWritten.catch(() => undefined);
    let fresh: Map<string, bigint>;
    try {
      const beside = this.prisma.poolSize >= 4 ? poolSql(this.prisma) : tx;
      const freshScope = await this.dimensionIdsFor(beside, scopeCells, freshLow);
      fresh = new Map([...freshLow, ...freshScope]);
    } finally {
      await projectWritten;
    }
    const scope = scopeCells.map((cell) => ({ cell, dimsId: idOf(cell, fresh) }));
    await upsertScopeRollups(tx, scope);
    await deleteEmptyRollups(tx, [...project, ...scope]);
    await saveCheckpoint(tx, ROLLUP_PROJECTION, checkpointAfter(checkpoint, events), events.length);
    return { events: events.length, newIds: fresh };
  }

  /**
   * The ids of the cells' tuples (but those in `known`): the cache's, taken now (a read-ahead
   * may clear the cache meanwhile), and the others resolved, the new ones inserted.
   */
  private async dimensionIdsFor(
    tx: SqlClient,
    cells: RollupCell[],
    known?: Map<string, bigint>,
  ): Promise<Map<string, bigint>> {
    const ids = new Map<string, bigint>();
    const missing = new Map<string, { projectId: string; key: string; values: (string | null)[] }>();
    for (const c of cells) {
      const k = dimKey(c);
      if (ids.has(k) || missing.has(k) || known?.has(k)) continue;
      const cached = this.dimensionIds.get(k);
      if (cached !== undefined) ids.set(k, cached);
      else missing.set(k, { projectId: c.projectId, key: c.dimsKey, values: c.dimsValues });
    }
    for (const [k, id] of await resolveDimensionIds(tx, [...missing.values()])) ids.set(k, id);
    return ids;
  }

  private remember(ids: Map<string, bigint>): void {
    if (this.dimensionIds.size + ids.size > DIMENSION_CACHE_LIMIT) this.dimensionIds.clear();
    for (const [k, v] of ids) this.dimensionIds.set(k, v);
  }
}

/** The log after `after`, commit-safe, in the columns the fold reads. */
const readRollupRows = (db: SqlClient, after: Checkpoint, limit: number) =>
  readLogRowsAfter(db as unknown as PrismaService, after, limit, ROLLUP_SELECT);

/** Statements straight on the pg pool, each on its own connection (Prisma's value conversion costs twice the read). */
const poolSql = (prisma: PrismaService): SqlClient => ({
  $queryRawUnsafe: async <R>(sql: string, ...values: unknown[]) => (await prisma.pool.query(sql, values)).rows as R,
  $executeRawUnsafe: async (sql: string, ...values: unknown[]) => (await prisma.pool.query(sql, values)).rowCount ?? 0,
});

const dimKey = (c: RollupCell) => `${c.projectId}\u001e${c.dimsKey}`;

/**
 * Events per batch. The minute cells of a burst of ingest are shared by many of its events, so a
 * larger batch writes fewer rows per event (bench:metrics' keep-up section).
 */
const DEFAULT_BATCH = 20_000;

interface ReadAhead {
  after: Checkpoint;
  batch: Promise<{ events: LogRow[]; cells: RollupCell[] }>;
}
