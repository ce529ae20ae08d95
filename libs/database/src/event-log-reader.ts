import { EVENT_SELECT } from './event-columns';
import type { PrismaService } from './prisma.service';

/** Where a reader stopped: the (transaction id, position) of the last event it consumed. */
export interface Checkpoint {
  /** xid8 as a decimal string (it does not fit a JS number). */
  tx: string;
  position: bigint;
}

export const LOG_START: Checkpoint = { tx: '0', position: 0n };

export interface LoggedEvent {
  tx: string;
  position: bigint;
  projectId: string;
  eventId: string;
  type: string;
  occurredAt: Date;
  recordedAt: Date;
  row: Record<string, unknown>;
}

/**
 * Reads the event log after a checkpoint in commit-safe order.
 *
 * Positions come from a sequence and commit out of order: a slow transaction can commit position
 * 10 after position 11 was read. Ordering by (tx, position) and reading only transactions older
 * than the oldest one still running (pg_snapshot_xmin) guarantees that nothing that commits later
 * can sort before what was already returned — so a checkpoint never skips an event.
 * The ORDER BY names the table's columns: a bare `tx` would be the `tx::text` output column, which
 * sorts '10' before '9' (a skipped event) and cannot use the (tx, position) index (a full sort).
 */
export async function readEventsAfter(
  prisma: PrismaService,
  after: Checkpoint,
  limit: number,
  projectId?: string,
): Promise<LoggedEvent[]> {
  const rows = await readLogRowsAfter(prisma, after, limit, EVENT_SELECT, projectId);
  return rows.map(({ tx, position, row: r }) => ({
    tx,
    position,
    projectId: r.project_id as string,
    eventId: r.event_id as string,
    type: r.type as string,
    occurredAt: r.occurred_at as Date,
    recordedAt: r.recorded_at as Date,
    row: r,
  }));
}

/** A log row as a reader that picks its columns gets it: its place in the log, and the columns selected. */
export interface LogRow {
  tx: string;
  position: bigint;
  row: Record<string, unknown>;
}

/**
 * The same commit-safe read as readEventsAfter, with the caller's column list (`select`, which
 * must give `tx` as text and `position`): a reader that needs a few of the log's columns does
 * not pay for decoding the others (the metric projector reads a third of them).
 */
export async function readLogRowsAfter(
  prisma: PrismaService,
  after: Checkpoint,
  limit: number,
  select: string,
  projectId?: string,
): Promise<LogRow[]> {
  const rows = await prisma.$queryRawUnsafe<Record<string, unknown>[]>(
    `SELECT ${select} FROM events
      WHERE (tx, position) > ($1::xid8, $2::bigint)
        AND tx < pg_snapshot_xmin(pg_current_snapshot())
        ${projectId ? 'AND project_id = $4' : ''}
      ORDER BY events.tx, events.position
      LIMIT $3`,
    ...[after.tx, after.position, limit, ...(projectId ? [projectId] : [])],
  );
  return rows.map((r) => ({ tx: r.tx as string, position: BigInt(r.position as bigint | number), row: r }));
}

/** The checkpoint just after `events`, or `after` itself when nothing was read. */
export function checkpointAfter(
  after: Checkpoint,
  events: readonly Pick<LoggedEvent, 'tx' | 'position'>[],
): Checkpoint {
  const last = events[events.length - 1];
  return last ? { tx: last.tx, position: last.position } : after;
}
