import type { LoggedEvent } from '@tollgate/database';
import { toWireEvent, type WireEvent } from '../wire/wire-event';

export interface BatchLimits {
  maxEvents: number;
  maxBytes: number;
  maxWaitMs: number;
}

export type BatchCut =
  | {
      flush: true;
      rows: LoggedEvent[];
      events: WireEvent[];
      bytes: number;
      /** Each event's JSON, reused for the request body. */ serialized: string[];
    }
  | { flush: false; waitMs: number };

export const matchesTypes = (types: readonly string[], type: string) => types.includes('*') || types.includes(type);

/**
 * Decides what the next batch is, from the log rows after the checkpoint (read with a limit of
 * maxEvents). Rows of types the exporter does not send ride along in the range (the checkpoint
 * passes them) but are not sent. The batch is cut at maxEvents sent events or before the event
 * that would pass maxBytes (a single larger event goes alone); a batch under both limits is
 * only sent once its oldest row has waited maxWaitMs.
 */
export function cutBatch(rows: LoggedEvent[], types: readonly string[], limits: BatchLimits, now: number): BatchCut {
  if (rows.length === 0) return { flush: false, waitMs: limits.maxWaitMs };
  const taken: LoggedEvent[] = [];
  const events: WireEvent[] = [];
  const serialized: string[] = [];
  let bytes = 2;
  let full = rows.length >= limits.maxEvents;
  for (const row of rows) {
    if (!matchesTypes(types, row.type)) {
      taken.push(row);
      continue;
    }
    const wire = toWireEvent(row);
    const json = JSON.stringify(wire);
    const size = Buffer.byteLength(json) + 1;
    if (events.length > 0 && bytes + size > limits.maxBytes) {
      full = true;
      break;
    }
    taken.push(row);
    events.push(wire);
    serialized.push(json);
    bytes += size;
    if (events.length >= limits.maxEvents) {
      full = true;
      break;
    }
  }
  const waited = now - rows[0].recordedAt.getTime();
  if (!full && events.length > 0 && waited < limits.maxWaitMs)
    return { flush: false, waitMs: limits.maxWaitMs - waited };
  return { flush: true, rows: taken, events, bytes, serialized };
}
