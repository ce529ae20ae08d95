import { GRANULARITY_MS } from '../granularity';
import { coverRange, type Range, type TimeCover } from './time-cover';

const t = (iso: string) => Date.parse(iso);

/** Every ms instant of a small sample falls in exactly one piece. */
function pieceOf(cover: TimeCover, x: number): string[] {
  const inRange = (r: Range, from: number | null, to: number | null) =>
    (from === null || x >= from) && (to === null || x < to);
  const hits: string[] = [];
  for (const s of cover.rollups) {
    const size = GRANULARITY_MS[s.granularity];
    const bucket = Math.floor(x / size) * size;
    if (inRange(s, s.from, s.to) && (s.from === null || bucket >= s.from) && (s.to === null || bucket < s.to))
      hits.push(s.granularity);
  }
  for (const r of cover.raw) if (inRange(r, r.from, r.to)) hits.push('raw');
  return hits;
}

describe('coverRange', () => {
  it('uses days inside, hours and minutes at the edges, raw for less than a minute', () => {
    const cover = coverRange({ from: t('2026-01-01T10:15:30.500Z'), to: t('2026-01-05T03:00:20Z') }, ['d', 'h', 'm']);
    expect(cover.rollups).toEqual([
      { granularity: 'd', from: t('2026-01-02T00:00:00Z'), to: t('2026-01-05T00:00:00Z') },
      { granularity: 'h', from: t('2026-01-01T11:00:00Z'), to: t('2026-01-02T00:00:00Z') },
      { granularity: 'm', from: t('2026-01-01T10:16:00Z'), to: t('2026-01-01T11:00:00Z') },
      { granularity: 'h', from: t('2026-01-05T00:00:00Z'), to: t('2026-01-05T03:00:00Z') },
    ]);
    expect(cover.raw).toEqual([
      { from: t('2026-01-01T10:15:30.500Z'), to: t('2026-01-01T10:16:00Z') },
      { from: t('2026-01-05T03:00:00Z'), to: t('2026-01-05T03:00:20Z') },
    ]);
  });

  it('covers every instant exactly once, bounded or not', () => {
    const ranges: Range[] = [
      { from: t('2026-01-01T10:15:30.500Z'), to: t('2026-01-01T10:15:40Z') },
      { from: t('2026-01-01T10:15:30Z'), to: t('2026-01-01T12:00:00Z') },
      { from: null, to: t('2026-01-03T00:00:01Z') },
      { from: t('2026-01-01T23:59:59.999Z'), to: null },
      { from: null, to: null },
    ];
    const start = t('2026-01-01T00:00:00Z');
    for (const range of ranges) {
      for (const levels of [['d', 'h', 'm'], ['h'], []] as const) {
        const cover = coverRange(range, levels);
        for (let x = start; x < start + 4 * GRANULARITY_MS.d; x += 997_331) {
          const inside = (range.from === null || x >= range.from) && (range.to === null || x < range.to);
          expect(pieceOf(cover, x)).toHaveLength(inside ? 1 : 0);
        }
      }
    }
  });

  it('returns nothing for an empty range', () => {
    expect(coverRange({ from: 10, to: 10 }, ['h'])).toEqual({ rollups: [], raw: [] });
  });
});
