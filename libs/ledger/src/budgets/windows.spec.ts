import { WINDOW_MS } from '@tollgate/contracts';
import { planWindow, type WindowPlan } from './windows';

const t = (iso: string) => Date.parse(iso);

/** Every millisecond from start on is covered exactly once (the last part is open-ended). */
function coverage(plan: WindowPlan): number {
  const parts = [...(plan.days ? [plan.days] : []), ...plan.hours, ...plan.raw];
  parts.sort((a, b) => a.from - b.from);
  let cursor = plan.start;
  for (const p of parts) {
    expect(p.from).toBe(cursor);
    expect(p.to).toBeGreaterThan(p.from);
    cursor = p.to;
  }
  expect(cursor).toBe(Infinity);
  return parts.length;
}

describe('planWindow', () => {
  it('splits 7 days into raw edges, whole hours and whole days', () => {
    const plan = planWindow('7d', t('2026-06-10T12:34:56.789Z'));
    expect(plan.raw).toEqual([{ from: t('2026-06-03T12:34:56.789Z'), to: t('2026-06-03T13:00:00Z') }]);
    expect(plan.hours).toEqual([
      { from: t('2026-06-03T13:00:00Z'), to: t('2026-06-04T00:00:00Z') },
      { from: t('2026-06-10T00:00:00Z'), to: t('2026-06-10T12:00:00Z') },
      // The current hour and any after it, from the counters: exact the moment a step commits.
      { from: t('2026-06-10T12:00:00Z'), to: Infinity },
    ]);
    expect(plan.days).toEqual({ from: t('2026-06-04T00:00:00Z'), to: t('2026-06-10T00:00:00Z') });
    coverage(plan);
  });

  it('uses hours only for windows shorter than a whole day', () => {
    const plan = planWindow('6h', t('2026-06-10T12:00:00.000Z'));
    expect(plan.days).toBeNull();
    expect(plan.raw).toEqual([]);
    expect(plan.hours).toEqual([
      { from: t('2026-06-10T06:00:00Z'), to: t('2026-06-10T12:00:00Z') },
      { from: t('2026-06-10T12:00:00Z'), to: Infinity },
    ]);
    coverage(plan);
  });

  it('never ends the window at now: a step dated ahead of the clock is inside it', () => {
    const now = t('2026-06-10T12:58:00Z');
    const ahead = t('2026-06-10T13:02:00Z'); // 4 minutes ahead, in the next hour
    const plan = planWindow('1h', now);
    expect(plan.hours.some((r) => r.from <= ahead && ahead < r.to)).toBe(true);
  });

  it.each(Object.keys(WINDOW_MS) as (keyof typeof WINDOW_MS)[])('covers the %s window exactly, at any instant', (w) => {
    for (const now of [
      '2026-01-01T00:00:00.000Z',
      '2026-03-01T23:59:59.999Z',
      '2026-07-15T06:30:00.000Z',
      '2026-12-31T23:00:00.001Z',
    ])
      coverage(planWindow(w, t(now)));
  });
});
