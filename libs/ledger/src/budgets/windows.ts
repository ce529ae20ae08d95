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
 * How a rolling window [now − w, …) is summed exactly: whole days and whole hours from the
 * counters, and the partial hour at its start from the log itself. Every instant of the window is
 * in exactly one part; no instant before it is in any. The window has no end: its last part, the
 * hour counters from the current hour on (`to` is Infinity), holds every committed step of the
 * current hour and any dated after it (a fast client clock, inside the accepted skew) — the
 * counters of an hour are exact the moment a step commits, so no hour at the end is read raw.
 */
export interface WindowPlan {
  start: number;
  days: Range | null;
  hours: Range[];
  raw: Range[];
}

export function planWindow(window: Window, now: number): WindowPlan {
  const start = now - WINDOW_MS[window];
  const hs = ceilTo(start, HOUR); // first whole hour
  const he = floorTo(now, HOUR); // start of the current hour
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
  // Open-ended: a step committed with an occurredAt ahead of our clock counts from its commit on.
  hours.push({ from: he, to: Infinity });
  const raw: Range[] = start < hs ? [{ from: start, to: hs }] : [];
  return { start, days, hours, raw };
}
