import { decideAlerts, type AlertState, type StepContribution } from './alert-decision';

const now = new Date('2026-06-10T12:00:00.000Z');
const money = { base: 'USD', rates: {} };
const KEY = 'resource:r1';

const state = (over: Partial<AlertState> = {}): AlertState => ({
  scopeKey: KEY,
  window: '1h',
  source: 'policy:p',
  limitType: 'totalTokens',
  kind: 'threshold',
  threshold: 80,
  limit: 1000,
  unit: 'tokens',
  hysteresis: 5,
  fired: false,
  firedCount: 0,
  ...over,
});
const step = (eventId: string, tokens: number, at = now): StepContribution => ({
  eventId,
  occurredAt: at,
  scopeKeys: [KEY],
  inputTokens: tokens,
  outputTokens: 0,
  costByUnit: {},
});
const usage = (tokens: number, key = `${KEY}@1h`) =>
  new Map([[key, { inputTokens: tokens, outputTokens: 0, costByUnit: {} }]]);

describe('decideAlerts', () => {
  it('fires an armed threshold once, naming the step of the batch with which the total reached it', () => {
    const { events, changed } = decideAlerts(
      [state()],
      usage(900),
      [step('a', 300), step('b', 600), step('c', 0)],
      money,
      now,
    );
    expect(events.map((e) => [e.data.stepEventId, e.data.usage, e.data.sequence])).toEqual([['b', 900, 1]]);
    expect(changed).toEqual([expect.objectContaining({ fired: true, firedCount: 1 })]);
  });

  it('does not fire a fired threshold whose usage stayed within the hysteresis, and re-arms it below', () => {
    // Before the step: 760 (≥ 750): still fired.
    expect(decideAlerts([state({ fired: true, firedCount: 1 })], usage(810), [step('a', 50)], money, now)).toEqual({
      changed: [],
      events: [],
    });
    // Before the step: 740 (< 750): re-armed, and the step takes it to 810 again: fires.
    const again = decideAlerts([state({ fired: true, firedCount: 1 })], usage(810), [step('a', 70)], money, now);
    expect(again.events.map((e) => [e.data.sequence, e.eventId.endsWith(':2')])).toEqual([[2, true]]);
    // Re-armed without crossing: stored armed.
    expect(
      decideAlerts([state({ fired: true, firedCount: 1 })], usage(500), [step('a', 10)], money, now).changed,
    ).toEqual([expect.objectContaining({ fired: false, firedCount: 1 })]);
  });

  it('counts only the steps inside the window in the usage before', () => {
    // A late step dated 2 h ago is not in the 1 h window: the usage before is the usage after.
    const late = step('late', 500, new Date(now.getTime() - 2 * 3600_000));
    expect(decideAlerts([state({ fired: true, firedCount: 1 })], usage(790), [late], money, now)).toEqual({
      changed: [],
      events: [],
    });
  });

  it('never re-arms a run threshold', () => {
    const run = state({ scopeKey: KEY, window: null, fired: true, firedCount: 1 });
    expect(decideAlerts([run], usage(900, KEY), [step('a', 900)], money, now)).toEqual({ changed: [], events: [] });
  });

  it('re-arms an exhausted budget below 100 − hysteresis percent, and never fires it (the guard does)', () => {
    const exhausted = state({ kind: 'exhausted', threshold: 100, fired: true, firedCount: 1 });
    expect(decideAlerts([exhausted], usage(1000), [step('a', 50)], money, now).changed).toEqual([]);
    expect(decideAlerts([exhausted], usage(1000), [step('a', 100)], money, now)).toEqual({
      changed: [expect.objectContaining({ kind: 'exhausted', fired: false })],
      events: [],
    });
  });

  it('compares cost in the limit unit, converting with the project rates', () => {
    const cost = state({ limitType: 'cost', unit: 'USD', limit: 1_000_000, threshold: 50 });
    const u = new Map([[`${KEY}@1h`, { inputTokens: 0, outputTokens: 0, costByUnit: { EUR: 500_000 } }]]);
    const { events } = decideAlerts(
      [cost],
      u,
      [{ ...step('a', 0), costByUnit: { EUR: 500_000 } }],
      { base: 'USD', rates: { EUR: 1.1 } },
      now,
    );
    expect(events.map((e) => [e.data.usage, e.data.limit, e.data.unit])).toEqual([[0.55, 1, 'USD']]);
  });
});
