import { Injectable, Logger } from '@nestjs/common';
import { checkpointAfter, PrismaService, readEventsAfter } from '@tollgate/database';
import { foldRollups, type RollupCell } from './rollup-batch';
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
    const batchSize = options.batchSize ?? 5000;
    const deadline = Date.now() + (options.maxMs ?? Number.POSITIVE_INFINITY);
    const result: CatchUpResult = { events: 0, batches: 0, caughtUp: false, busy: false };
    while (Date.now() < deadline) {
      const read = await this.inTransaction((tx) => this.projectBatch(tx, batchSize, options.waitForLock ?? false));
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
   * The SQL is the same either way (SqlClient), and readEventsAfter is the commit-safe reader.
   */
  private async inTransaction<T>(work: (tx: SqlClient) => Promise<T>): Promise<T> {
    const client = await this.prisma.pool.connect();
    const tx: SqlClient = {
      $queryRawUnsafe: async <R>(sql: string, ...values: unknown[]) => (await client.query(sql, values)).rows as R,
      $executeRawUnsafe: async (sql: string, ...values: unknown[]) => (await client.query(sql, values)).rowCount ?? 0,
    };
    try {
      await client.query('BEGIN');
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

  /** One batch in the caller's transaction; null when another worker holds the projection. */
  private async projectBatch(tx: SqlClient, batchSize: number, waitForLock: boolean): Promise<{ events: number; newIds: Map<string, bigint> } | null> {
    const checkpoint = await lockCheckpoint(tx, ROLLUP_PROJECTION, !waitForLock);
    if (!checkpoint) return null;
    const events = await readEventsAfter(tx as unknown as PrismaService, checkpoint, batchSize);
    if (events.length === 0) return { events: 0, newIds: new Map() };
    const cells = foldRollups(events.map((e) => e.row));
    const fresh = await this.dimensionIdsFor(tx, cells);
    const withIds = cells.map((cell) => ({ cell, dimsId: (this.dimensionIds.get(dimKey(cell)) ?? fresh.get(dimKey(cell)))! }));
    await upsertProjectRollups(tx, withIds.filter((c) => c.cell.cube !== 'scope'));
    await upsertScopeRollups(tx, withIds.filter((c) => c.cell.cube === 'scope'));
    await deleteEmptyRollups(tx, withIds);
    await saveCheckpoint(tx, ROLLUP_PROJECTION, checkpointAfter(checkpoint, events), events.length);
    return { events: events.length, newIds: fresh };
  }

  private async dimensionIdsFor(tx: SqlClient, cells: RollupCell[]): Promise<Map<string, bigint>> {
    const missing = new Map<string, { projectId: string; key: string; values: (string | null)[] }>();
    for (const c of cells) {
      const k = dimKey(c);
      if (!this.dimensionIds.has(k) && !missing.has(k)) missing.set(k, { projectId: c.projectId, key: c.dimsKey, values: c.dimsValues });
    }
    return resolveDimensionIds(tx, [...missing.values()]);
  }

  private remember(ids: Map<string, bigint>): void {
    if (this.dimensionIds.size + ids.size > DIMENSION_CACHE_LIMIT) this.dimensionIds.clear();
    for (const [k, v] of ids) this.dimensionIds.set(k, v);
  }
}

const dimKey = (c: RollupCell) => `${c.projectId}\u001e${c.dimsKey}`;
