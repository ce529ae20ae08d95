import { GRANULARITY_MS, type Granularity } from '../granularity';

/** A half-open range [from, to) in epoch ms; null is unbounded. */
export interface Range {
  from: number | null;
  to: number | null;
}

export interface RollupSegment extends Range {
  granularity: Granularity;
}

export interface TimeCover {
  /** Bucket ranges read from rollups: buckets of `granularity` whose start is in [from, to). */
  rollups: RollupSegment[];
  /** Ranges read from raw events (the edges that do not fill a whole bucket). */
  raw: Range[];
}

const ceilTo = (x: number, size: number) => Math.ceil(x / size) * size;
const floorTo = (x: number, size: number) => Math.floor(x / size) * size;

/**
 * Splits [from, to) into whole buckets of the coarsest granularity first, then finer ones at the
 * edges, and what is left (less than one bucket of the finest level, per edge) as raw ranges. The
 * union is exactly [from, to), with no overlap, so sums over the pieces are exact.
 */
export function coverRange(range: Range, levels: readonly Granularity[]): TimeCover {
  const out: TimeCover = { rollups: [], raw: [] };
  const walk = (from: number | null, to: number | null, rest: readonly Granularity[]) => {
    if (from !== null && to !== null && from >= to) return;
    if (rest.length === 0) {
      out.raw.push({ from, to });
      return;
    }
    const [g, ...finer] = rest;
    const size = GRANULARITY_MS[g];
    const a = from === null ? null : ceilTo(from, size);
    const b = to === null ? null : floorTo(to, size);
    if (a === null || b === null || a < b) {
      out.rollups.push({ granularity: g, from: a, to: b });
      if (from !== null) walk(from, a, finer);
      if (to !== null) walk(b, to, finer);
    } else {
      walk(from, to, finer);
    }
  };
  walk(range.from, range.to, levels);
  return out;
}
