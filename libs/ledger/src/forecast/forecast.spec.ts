import type { EffectiveLimit } from '../budgets/guard-decision';
import { emptyUsage } from '../budgets/guard-decision';
import { forecastOf } from './forecast';

const asOf = new Date('2026-06-10T12:00:00.000Z');
const money = { base: 'USD', rates: {} };
const limit = (over: Partial<EffectiveLimit>): EffectiveLimit => ({
  scope: 'resource',
  scopeKey: 'resource:r',
  window: '24h',
  costUnit: 'USD',
  strategy: 'block',
  source: 'request',
  ...over,
});

describe('forecastOf', () => {
  it('projects the last hour’s rate onto what is left of each limit', () => {
    // $3 used of $10 (plus $1 reserved), $0.50 in the last hour: $6 left at $0.50 / h = 12 h.
    const usage = {
      ...emptyUsage(),
      costByUnit: { USD: 3_000_000 },
      reservedCostByUnit: { USD: 1_000_000 },
      inputTokens: 40_000,
      outputTokens: 2_000,
    };
    const hour = { ...emptyUsage(), costByUnit: { USD: 500_000 }, inputTokens: 9_000, outputTokens: 1_000 };
    const f = forecastOf(
      '24h',
      [limit({ maxCostMicros: 10_000_000, maxTotalTokens: 1_000_000 })],
      usage,
      hour,
      money,
      asOf,
    );
    expect(f.burnRate).toEqual({
      cost: 0.5,
      costUnit: 'USD',
      totalTokens: 10_000,
      inputTokens: 9_000,
      outputTokens: 1_000,
    });
    // 958 000 tokens left at 10 000 / h = 95.8 h: more than the 24 h window, so null.
    expect(f.limits).toEqual([
      { source: 'request', limitType: 'cost', limit: 10, unit: 'USD', reachedAt: '2026-06-11T00:00:00.000Z' },
      { source: 'request', limitType: 'totalTokens', limit: 1_000_000, unit: 'tokens', reachedAt: null },
    ]);
    expect(f.limitReachedAt).toBe('2026-06-11T00:00:00.000Z');
  });

  it('is now when the limit is already reached, and null with no usage in the last hour', () => {
    const used = { ...emptyUsage(), inputTokens: 500 };
    expect(
      forecastOf('1h', [limit({ window: '1h', maxInputTokens: 500 })], used, emptyUsage(), money, asOf).limitReachedAt,
    ).toBe(asOf.toISOString());
    expect(forecastOf('1h', [limit({ window: '1h', maxInputTokens: 501 })], used, emptyUsage(), money, asOf)).toEqual({
      burnRate: { cost: 0, costUnit: null, totalTokens: 0, inputTokens: 0, outputTokens: 0 },
      limits: [{ source: 'request', limitType: 'inputTokens', limit: 501, unit: 'tokens', reachedAt: null }],
      limitReachedAt: null,
    });
  });
});
