import { WINDOW_MS, type Window } from '@tollgate/contracts';

const HOUR = 3600_000;
const DAY = 24 * HOUR;

const floorTo = (t: number, unit: number) => Math.floor(t / unit) * unit;
const ceilTo = (t: number, unit: number) => Math.ceil(t / unit) * unit;

/** Half-open ranges [from, to) in epoch milliseconds. */
export interface Range {
  from: number;
  to: number;
}

/**
 * How a rolling window [now − w, now] is summed exactly: whole days and whole hours from the
 * counters, and the partial hours at both ends from the log itself. Every instant of the window is
 * in exactly one part; no instant before it is in any. The last part has no end (`to` is Infinity):
 * a committed step dated after now (a fast client clock, inside the accepted skew) still counts.
 */
export interface WindowPlan {
  start: number;
  end: number;
  days: Range | null;
  hours: Range[];
  raw: Range[];
}

export function planWindow(window: Window, now: number): WindowPlan {
  const start = now - WINDOW_MS[window];
  const hs = ceilTo(start, HOUR); // first whole hour
  const he = floorTo(now, HOUR); // start of the current, partial hour
  const ds = ceilTo(hs, DAY);
  const de = floorTo(he, DAY);
  const hours: Range[] = [];
  let days: Range | null = null;
  if (ds < de) {
    days = { from: ds, to: de };
    if (hs < ds) hours.push({ from: hs, to: ds });
    if (de < he) hours.push({ from: de, to: he });
  } else if (hs < he) {
    hours.push({ from: hs, to: he });
  }
  const raw: Range[] = [];
  if (start < hs) raw.push({ from: start, to: hs });
  // Open-ended: a step committed with an occurredAt ahead of our clock counts from its commit on.
  raw.push({ from: he, to: Infinity });
  return { start, end: now, days, hours, raw };
}
