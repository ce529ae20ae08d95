import { readEventsAfter, type Checkpoint, type LoggedEvent, type PrismaService } from '@tollgate/database';

/**
 * The exporter state machine, one SQL statement per transition. Every transition that moves a
 * checkpoint is conditional on the state it was decided from (compare-and-set), so two workers,
 * a replay or a stale job can never move it past an event that was neither acknowledged by the
 * sink nor recorded in the dead-letter set.
 */

export interface BatchRow {
  id: string;
  exporterId: string;
  status: 'in_flight' | 'dead' | 'retrying';
  from: Checkpoint;
  to: Checkpoint;
  logRows: number;
  eventCount: number;
  attempts: number;
  lastError: string | null;
  jobId: string | null;
  createdAt: Date;
  failedAt: Date | null;
}

const BATCH_COLUMNS = `id, exporter_id, status, from_tx, from_position, to_tx, to_position, log_rows, event_count, attempts, last_error, job_id, created_at, failed_at`;

function batchOf(r: Record<string, unknown>): BatchRow {
  return {
    id: r.id as string,
    exporterId: r.exporter_id as string,
    status: r.status as BatchRow['status'],
    from: { tx: r.from_tx as string, position: BigInt(r.from_position as bigint) },
    to: { tx: r.to_tx as string, position: BigInt(r.to_position as bigint) },
    logRows: Number(r.log_rows),
    eventCount: Number(r.event_count),
    attempts: Number(r.attempts),
    lastError: (r.last_error as string | null) ?? null,
    jobId: (r.job_id as string | null) ?? null,
    createdAt: r.created_at as Date,
    failedAt: (r.failed_at as Date | null) ?? null,
  };
}

/** The last commit-safe entry of a project's log: where an exporter created "from now" starts. */
export async function logHead(prisma: PrismaService, projectId: string): Promise<Checkpoint> {
  const rows = await prisma.$queryRawUnsafe<{ tx: string; position: bigint }[]>(
    `SELECT tx::text AS tx, position FROM events
      WHERE project_id = $1 AND tx < pg_snapshot_xmin(pg_current_snapshot())
      ORDER BY tx DESC, position DESC LIMIT 1`,
    projectId,
  );
  return rows[0] ? { tx: rows[0].tx, position: BigInt(rows[0].position) } : { tx: '0', position: 0n };
}

/**
 * Records the next batch of the stream as in flight, only if the exporter is active, has no
 * batch in flight and its checkpoint is still `from`. False when another worker got there first.
 */
export async function claimBatch(
  prisma: PrismaService,
  batch: {
    id: string;
    exporterId: string;
    from: Checkpoint;
    to: Checkpoint;
    logRows: number;
    eventCount: number;
    jobId: string;
  },
): Promise<boolean> {
  const rows = await prisma.$queryRawUnsafe<{ id: string }[]>(
    `WITH claimed AS (
       UPDATE exporters SET in_flight_batch = $1
        WHERE id = $2 AND status = 'active' AND in_flight_batch IS NULL
          AND checkpoint_tx = $3 AND checkpoint_position = $4
       RETURNING id
     )
     INSERT INTO export_batches (id, exporter_id, status, from_tx, from_position, to_tx, to_position, log_rows, event_count, job_id)
     SELECT $1, id, 'in_flight', $3, $4, $5, $6, $7, $8, $9 FROM claimed
     RETURNING id`,
    batch.id,
    batch.exporterId,
    batch.from.tx,
    batch.from.position,
    batch.to.tx,
    batch.to.position,
    batch.logRows,
    batch.eventCount,
    batch.jobId,
  );
  return rows.length === 1;
}

/** Moves the checkpoint over a range that holds nothing this exporter sends. */
export async function skipRange(
  prisma: PrismaService,
  exporterId: string,
  from: Checkpoint,
  to: Checkpoint,
): Promise<boolean> {
  const n = await prisma.$executeRawUnsafe(
    `UPDATE exporters SET checkpoint_tx = $4, checkpoint_position = $5
      WHERE id = $1 AND status = 'active' AND in_flight_batch IS NULL AND checkpoint_tx = $2 AND checkpoint_position = $3`,
    exporterId,
    from.tx,
    from.position,
    to.tx,
    to.position,
  );
  return n === 1;
}

export async function findBatch(prisma: PrismaService, batchId: string): Promise<BatchRow | null> {
  const rows = await prisma.$queryRawUnsafe<Record<string, unknown>[]>(
    `SELECT ${BATCH_COLUMNS} FROM export_batches WHERE id = $1`,
    batchId,
  );
  return rows[0] ? batchOf(rows[0]) : null;
}

export async function setBatchJob(prisma: PrismaService, batchId: string, jobId: string): Promise<void> {
  await prisma.$executeRawUnsafe(`UPDATE export_batches SET job_id = $2 WHERE id = $1`, batchId, jobId);
}

/** Counts an attempt and keeps its error, for the dead-letter listing. */
export async function recordAttempt(prisma: PrismaService, batchId: string, error: string | null): Promise<void> {
  await prisma.$executeRawUnsafe(
    `UPDATE export_batches SET attempts = attempts + 1, last_error = coalesce($2, last_error) WHERE id = $1`,
    batchId,
    error,
  );
}

/**
 * The sink acknowledged the batch: it leaves the table, and when it was the stream's in-flight
 * batch the checkpoint moves to its end — unless a replay moved the checkpoint meanwhile, in
 * which case the replayed position stands. One statement, so it commits whole or not at all.
 */
export async function completeBatch(
  prisma: PrismaService,
  batchId: string,
): Promise<{ done: boolean; advanced: boolean }> {
  const rows = await prisma.$queryRawUnsafe<{ status: string; advanced: boolean | null }[]>(
    `WITH done AS (
       DELETE FROM export_batches WHERE id = $1 AND status IN ('in_flight', 'retrying') RETURNING *
     ),
     moved AS (
       UPDATE exporters e SET
         checkpoint_tx = CASE WHEN e.checkpoint_tx = done.from_tx AND e.checkpoint_position = done.from_position THEN done.to_tx ELSE e.checkpoint_tx END,
         checkpoint_position = CASE WHEN e.checkpoint_tx = done.from_tx AND e.checkpoint_position = done.from_position THEN done.to_position ELSE e.checkpoint_position END,
         in_flight_batch = NULL, consecutive_failures = 0, last_delivered_at = now()
       FROM done
       WHERE e.id = done.exporter_id AND done.status = 'in_flight' AND e.in_flight_batch = done.id
       RETURNING e.checkpoint_tx = done.to_tx AND e.checkpoint_position = done.to_position AS advanced
     )
     SELECT done.status, (SELECT advanced FROM moved) AS advanced FROM done`,
    batchId,
  );
  return { done: rows.length === 1, advanced: rows[0]?.advanced === true };
}

/**
 * A batch failed for good: it becomes a dead letter (its range and last error), and when it was
 * the stream's in-flight batch the checkpoint moves past it (the dead-letter row now holds those
 * events) and the failure streak grows; at `pauseAfter` in a row the exporter pauses with the
 * reason. Returns whether the exporter is now paused.
 */
export async function deadLetterBatch(
  prisma: PrismaService,
  batchId: string,
  error: string,
  pauseAfter: number,
): Promise<{ dead: boolean; paused: boolean }> {
  const rows = await prisma.$queryRawUnsafe<{ status: string; paused: boolean | null }[]>(
    `WITH before AS (
       SELECT id, status AS was FROM export_batches WHERE id = $1 AND status IN ('in_flight', 'retrying') FOR UPDATE
     ),
     dead AS (
       UPDATE export_batches b SET status = 'dead', last_error = $2, failed_at = now()
         FROM before WHERE b.id = before.id
       RETURNING b.*, before.was
     ),
     moved AS (
       UPDATE exporters e SET
         checkpoint_tx = CASE WHEN e.checkpoint_tx = dead.from_tx AND e.checkpoint_position = dead.from_position THEN dead.to_tx ELSE e.checkpoint_tx END,
         checkpoint_position = CASE WHEN e.checkpoint_tx = dead.from_tx AND e.checkpoint_position = dead.from_position THEN dead.to_position ELSE e.checkpoint_position END,
         in_flight_batch = NULL,
         consecutive_failures = e.consecutive_failures + 1,
         status = CASE WHEN e.consecutive_failures + 1 >= $3 THEN 'paused' ELSE e.status END,
         paused_reason = CASE WHEN e.consecutive_failures + 1 >= $3
           THEN format('%s batches in a row failed and were dead-lettered; last error: %s', e.consecutive_failures + 1, $2)
           ELSE e.paused_reason END,
         updated_at = now()
       FROM dead
       WHERE e.id = dead.exporter_id AND dead.was = 'in_flight' AND e.in_flight_batch = dead.id
       RETURNING e.status = 'paused' AS paused
     )
     SELECT dead.was AS status, (SELECT paused FROM moved) AS paused FROM dead`,
    batchId,
    error,
    pauseAfter,
  );
  return { dead: rows.length === 1, paused: rows[0]?.paused === true };
}

/** Pauses an exporter with a reason (the in-flight batch, if any, stays and resumes with it). */
export async function pauseExporter(prisma: PrismaService, exporterId: string, reason: string): Promise<void> {
  await prisma.$executeRawUnsafe(
    `UPDATE exporters SET status = 'paused', paused_reason = $2, updated_at = now() WHERE id = $1`,
    exporterId,
    reason,
  );
}

export async function resumeExporter(prisma: PrismaService, exporterId: string): Promise<void> {
  await prisma.$executeRawUnsafe(
    `UPDATE exporters SET status = 'active', paused_reason = NULL, consecutive_failures = 0, updated_at = now() WHERE id = $1`,
    exporterId,
  );
}

/** Marks dead letters for another try; returns the batches to enqueue. */
export async function reviveDeadLetters(
  prisma: PrismaService,
  exporterId: string,
  batchId?: string,
): Promise<BatchRow[]> {
  const rows = await prisma.$queryRawUnsafe<Record<string, unknown>[]>(
    `UPDATE export_batches SET status = 'retrying', attempts = 0
      WHERE exporter_id = $1 AND status = 'dead' ${batchId ? 'AND id = $2' : ''}
      RETURNING ${BATCH_COLUMNS}`,
    ...(batchId ? [exporterId, batchId] : [exporterId]),
  );
  return rows.map(batchOf);
}

export async function listBatches(
  prisma: PrismaService,
  exporterId: string,
  statuses: BatchRow['status'][],
  limit = 1000,
): Promise<BatchRow[]> {
  const rows = await prisma.$queryRawUnsafe<Record<string, unknown>[]>(
    `SELECT ${BATCH_COLUMNS} FROM export_batches WHERE exporter_id = $1 AND status = ANY($2::text[]) ORDER BY from_tx::xid8, from_position LIMIT $3`,
    exporterId,
    statuses,
    limit,
  );
  return rows.map(batchOf);
}

/**
 * Moves the checkpoint back to just before the first event at or after `fromPosition` (or that
 * occurred at or after `fromTime`), in log order. Never forward: a replay cannot skip events
 * that were not delivered yet. Returns the new checkpoint.
 */
export async function rewindCheckpoint(
  prisma: PrismaService,
  exporterId: string,
  projectId: string,
  from: { position: bigint } | { time: Date },
): Promise<Checkpoint | null> {
  const where = 'position' in from ? 'position >= $2' : 'occurred_at >= $2';
  const rows = await prisma.$queryRawUnsafe<{ checkpoint_tx: string; checkpoint_position: bigint }[]>(
    `WITH first AS (
       SELECT tx, position FROM events WHERE project_id = $1 AND ${where} ORDER BY tx, position LIMIT 1
     )
     UPDATE exporters e SET checkpoint_tx = first.tx::text, checkpoint_position = first.position - 1, updated_at = now()
       FROM first
      WHERE e.id = $3 AND (first.tx, first.position - 1) < (e.checkpoint_tx::xid8, e.checkpoint_position)
     RETURNING e.checkpoint_tx, e.checkpoint_position`,
    projectId,
    'position' in from ? from.position : from.time,
    exporterId,
  );
  return rows[0] ? { tx: rows[0].checkpoint_tx, position: BigInt(rows[0].checkpoint_position) } : null;
}

/**
 * The log rows of a batch's range, re-read: exactly the rows first cut, since the range ends
 * below the commit horizon it was cut at and the log is never updated.
 */
export async function readRange(
  prisma: PrismaService,
  projectId: string,
  batch: Pick<BatchRow, 'from' | 'to' | 'logRows'>,
): Promise<LoggedEvent[]> {
  const rows = await readEventsAfter(prisma, batch.from, batch.logRows, projectId);
  const last = rows[rows.length - 1];
  if (rows.length !== batch.logRows || !last || last.tx !== batch.to.tx || last.position !== batch.to.position) {
    throw new Error(
      `Batch range (${batch.from.tx}/${batch.from.position}, ${batch.to.tx}/${batch.to.position}] no longer reads back the same ${batch.logRows} rows (was its partition dropped?)`,
    );
  }
  return rows;
}

export interface ExporterLag {
  exporterId: string;
  projectId: string;
  name: string;
  status: string;
  lagEvents: number;
  lagSeconds: number;
  deadBatches: number;
  deadEvents: number;
}

/** Lag (log entries after the checkpoint, capped; age of the oldest) and dead letters, per exporter. */
export async function exporterLags(prisma: PrismaService, exporterId?: string): Promise<ExporterLag[]> {
  const rows = await prisma.$queryRawUnsafe<Record<string, unknown>[]>(
    `SELECT e.id, e.project_id, e.name, e.status,
            (SELECT count(*) FROM (SELECT 1 FROM events v
               WHERE v.project_id = e.project_id AND (v.tx, v.position) > (e.checkpoint_tx::xid8, e.checkpoint_position)
               LIMIT 1000000) AS x) AS lag_events,
            coalesce(extract(epoch FROM now() - (SELECT v.recorded_at FROM events v
               WHERE v.project_id = e.project_id AND (v.tx, v.position) > (e.checkpoint_tx::xid8, e.checkpoint_position)
               ORDER BY v.tx, v.position LIMIT 1)), 0)::float8 AS lag_seconds,
            (SELECT count(*) FROM export_batches b WHERE b.exporter_id = e.id AND b.status = 'dead') AS dead_batches,
            (SELECT coalesce(sum(event_count), 0) FROM export_batches b WHERE b.exporter_id = e.id AND b.status = 'dead') AS dead_events
       FROM exporters e ${exporterId ? 'WHERE e.id = $1' : ''}`,
    ...(exporterId ? [exporterId] : []),
  );
  return rows.map((r) => ({
    exporterId: r.id as string,
    projectId: r.project_id as string,
    name: r.name as string,
    status: r.status as string,
    lagEvents: Number(r.lag_events),
    lagSeconds: Math.max(0, Number(r.lag_seconds)),
    deadBatches: Number(r.dead_batches),
    deadEvents: Number(r.dead_events),
  }));
}
