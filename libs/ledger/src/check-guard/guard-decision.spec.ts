import { decide, EMPTY_USAGE, usageKey, type EffectiveLimit, type UsageTotals } from './guard-decision';

const limit = (over: Partial<EffectiveLimit> = {}): EffectiveLimit => ({ scope: 'resource', scopeKey: 'resource:r1', window: '7d', strategy: 'block', source: 'request', ...over });
const usage = (over: Partial<UsageTotals> = {}) => new Map([[usageKey('resource:r1', '7d'), { ...EMPTY_USAGE, costUnit: 'USD', ...over }]]);
const $ = (usd: number) => usd * 1_000_000;

describe('decide (given usage and limits → decision)', () => {
  const table: [string, EffectiveLimit, Map<string, UsageTotals>, Parameters<typeof decide>[2], 'allow' | 'deny', number][] = [
    ['under a cost limit', limit({ maxCostMicros: $(1) }), usage({ costMicros: $(0.5) }), undefined, 'allow', 0],
    ['exactly at a cost limit (reached counts, as in Mastra)', limit({ maxCostMicros: $(1) }), usage({ costMicros: $(1) }), undefined, 'deny', 1],
    ['the estimate tipping usage to the limit', limit({ maxCostMicros: $(1) }), usage({ costMicros: $(0.9) }), { inputTokens: 0, outputTokens: 0, costMicros: $(0.1), costUnit: 'USD' }, 'deny', 1],
    ['the estimate staying just under', limit({ maxCostMicros: $(1) }), usage({ costMicros: $(0.9) }), { inputTokens: 0, outputTokens: 0, costMicros: $(0.1) - 1, costUnit: 'USD' }, 'allow', 0],
    ['open reservations counting as usage', limit({ maxCostMicros: $(1) }), usage({ costMicros: $(0.5), reservedCostMicros: $(0.5) }), undefined, 'deny', 1],
    ['total tokens with reserved tokens', limit({ maxTotalTokens: 1000 }), usage({ inputTokens: 400, outputTokens: 100, reservedInputTokens: 300, reservedOutputTokens: 199 }), undefined, 'allow', 0],
    ['total tokens reached by the estimate', limit({ maxTotalTokens: 1000 }), usage({ inputTokens: 400, outputTokens: 100 }), { inputTokens: 300, outputTokens: 200, costMicros: 0, costUnit: 'USD' }, 'deny', 1],
    ['input tokens only', limit({ maxInputTokens: 100 }), usage({ inputTokens: 99, outputTokens: 10_000 }), undefined, 'allow', 0],
    ['output tokens only', limit({ maxOutputTokens: 100 }), usage({ inputTokens: 10_000, outputTokens: 100 }), undefined, 'deny', 1],
    ['no usage yet', limit({ maxCostMicros: $(1) }), new Map(), undefined, 'allow', 0],
    ['a warn policy reaching its limit', limit({ maxCostMicros: $(1), strategy: 'warn' }), usage({ costMicros: $(2) }), undefined, 'allow', 0],
  ];

  it.each(table)('%s', (_name, l, u, estimate, expected, violations) => {
    const d = decide([l], u, estimate, 'count_tokens');
    expect(d.decision).toBe(expected);
    expect(d.violations).toHaveLength(violations);
  });

  it('reports the violation with its scope, window, unit and amounts in currency units', () => {
    const d = decide([limit({ maxCostMicros: $(1) })], usage({ costMicros: $(0.75), reservedCostMicros: $(0.25) }), undefined, 'count_tokens');
    expect(d.violations).toEqual([{ scope: 'resource', scopeKey: 'resource:r1', window: '7d', limitType: 'cost', usage: 1, limit: 1, unit: 'USD', threshold: 'hard', source: 'request' }]);
  });

  it('warns at the soft threshold without denying', () => {
    const d = decide([limit({ maxCostMicros: $(1), warnAtPercent: 80 })], usage({ costMicros: $(0.8) }), undefined, 'count_tokens');
    expect(d.decision).toBe('allow');
    expect(d.warnings).toEqual([expect.objectContaining({ threshold: 'soft', usage: 0.8, limit: 1 })]);
    expect(decide([limit({ maxCostMicros: $(1), warnAtPercent: 80 })], usage({ costMicros: $(0.79) }), undefined, 'count_tokens').warnings).toEqual([]);
  });

  it('reports a warn policy past its limit as a hard warning', () => {
    const d = decide([limit({ maxCostMicros: $(1), strategy: 'warn', source: 'policy:soft-cap' })], usage({ costMicros: $(1) }), undefined, 'count_tokens');
    expect(d.warnings).toEqual([expect.objectContaining({ threshold: 'hard', source: 'policy:soft-cap' })]);
  });

  it('checks every limit and every scope in one decision', () => {
    const u = new Map([
      [usageKey('resource:r1', '7d'), { ...EMPTY_USAGE, costMicros: $(0.1) }],
      [usageKey('thread:t1', '24h'), { ...EMPTY_USAGE, inputTokens: 5000 }],
    ]);
    const d = decide([limit({ maxCostMicros: $(1) }), limit({ scope: 'thread', scopeKey: 'thread:t1', window: '24h', maxInputTokens: 5000 })], u, undefined, 'count_tokens');
    expect(d.decision).toBe('deny');
    expect(d.violations.map((v) => v.scopeKey)).toEqual(['thread:t1']);
  });

  describe('unpriced usage', () => {
    it('counts tokens only by default: an unpriced estimate adds no cost', () => {
      const d = decide([limit({ maxCostMicros: $(1) })], usage({ costMicros: $(0.5), unpricedEvents: 3 }), { inputTokens: 10, outputTokens: 10, costMicros: null, costUnit: 'USD' }, 'count_tokens');
      expect(d.decision).toBe('allow');
    });
    it('denies cost-limited steps when the project says so', () => {
      expect(decide([limit({ maxCostMicros: $(1) })], usage({ unpricedEvents: 1 }), undefined, 'deny').decision).toBe('deny');
      expect(decide([limit({ maxCostMicros: $(1) })], usage(), { inputTokens: 1, outputTokens: 1, costMicros: null, costUnit: 'USD' }, 'deny').decision).toBe('deny');
      // Token limits are unaffected.
      expect(decide([limit({ maxTotalTokens: 100 })], usage({ unpricedEvents: 1 }), undefined, 'deny').decision).toBe('allow');
    });
  });
});
