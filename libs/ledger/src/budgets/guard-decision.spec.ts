import {
  decide,
  decideInOrder,
  decideStep,
  emptyUsage,
  hold,
  usageKey,
  type CheckCase,
  type EffectiveLimit,
  type GuardSettings,
  type StepEstimate,
  type UsageTotals,
} from './guard-decision';
import { newReservation } from './new-reservation.fixture';

const limit = (over: Partial<EffectiveLimit> = {}): EffectiveLimit => ({
  scope: 'resource',
  scopeKey: 'resource:r1',
  window: '7d',
  costUnit: 'USD',
  strategy: 'block',
  source: 'request',
  ...over,
});
const usage = (over: Partial<UsageTotals> = {}) =>
  new Map([[usageKey('resource:r1', '7d'), { ...emptyUsage(), ...over }]]);
const $ = (usd: number) => usd * 1_000_000;
const usd = (n: number) => ({ USD: $(n) });
const estimate = (over: Partial<StepEstimate> = {}): StepEstimate => ({
  provider: 'openai',
  model: 'gpt-4o',
  rawInputTokens: 0,
  inputTokens: 0,
  outputTokens: 0,
  margin: 1,
  costMicros: 0,
  costUnit: 'USD',
  priced: true,
  ...over,
});
const settings = (over: Partial<GuardSettings> = {}): GuardSettings => ({
  unpricedPolicy: 'deny',
  fallback: null,
  money: { base: 'USD', rates: {} },
  ...over,
});

describe('decide (given usage and limits, when a step is checked, then …)', () => {
  const table: [
    string,
    EffectiveLimit,
    Map<string, UsageTotals>,
    StepEstimate | undefined,
    'allow' | 'deny',
    number,
  ][] = [
    ['under a cost limit', limit({ maxCostMicros: $(1) }), usage({ costByUnit: usd(0.5) }), undefined, 'allow', 0],
    [
      'exactly at a cost limit (reached counts, as in Mastra)',
      limit({ maxCostMicros: $(1) }),
      usage({ costByUnit: usd(1) }),
      undefined,
      'deny',
      1,
    ],
    [
      'the estimate tipping usage to the limit',
      limit({ maxCostMicros: $(1) }),
      usage({ costByUnit: usd(0.9) }),
      estimate({ costMicros: $(0.1) }),
      'deny',
      1,
    ],
    [
      'the estimate staying just under',
      limit({ maxCostMicros: $(1) }),
      usage({ costByUnit: usd(0.9) }),
      estimate({ costMicros: $(0.1) - 1 }),
      'allow',
      0,
    ],
    [
      'open reservations counting as usage',
      limit({ maxCostMicros: $(1) }),
      usage({ costByUnit: usd(0.5), reservedCostByUnit: usd(0.5) }),
      undefined,
      'deny',
      1,
    ],
    [
      'total tokens with reserved tokens',
      limit({ maxTotalTokens: 1000 }),
      usage({ inputTokens: 400, outputTokens: 100, reservedInputTokens: 300, reservedOutputTokens: 199 }),
      undefined,
      'allow',
      0,
    ],
    [
      'total tokens reached by the estimate',
      limit({ maxTotalTokens: 1000 }),
      usage({ inputTokens: 400, outputTokens: 100 }),
      estimate({ inputTokens: 300, outputTokens: 200 }),
      'deny',
      1,
    ],
    [
      'input tokens only',
      limit({ maxInputTokens: 100 }),
      usage({ inputTokens: 99, outputTokens: 10_000 }),
      undefined,
      'allow',
      0,
    ],
    [
      'output tokens only',
      limit({ maxOutputTokens: 100 }),
      usage({ inputTokens: 10_000, outputTokens: 100 }),
      undefined,
      'deny',
      1,
    ],
    ['no usage yet', limit({ maxCostMicros: $(1) }), new Map(), undefined, 'allow', 0],
    [
      'a warn policy reaching its limit',
      limit({ maxCostMicros: $(1), strategy: 'warn' }),
      usage({ costByUnit: usd(2) }),
      undefined,
      'allow',
      0,
    ],
  ];

  it.each(table)('%s', (_name, l, u, e, expected, violations) => {
    const d = decide([l], u, e, settings());
    expect(d.decision).toBe(expected);
    expect(d.violations).toHaveLength(violations);
  });

  it('reports the violation with its scope, window, unit and amounts in currency units', () => {
    const d = decide(
      [limit({ maxCostMicros: $(1) })],
      usage({ costByUnit: usd(0.75), reservedCostByUnit: usd(0.25) }),
      undefined,
      settings(),
    );
    expect(d.violations).toEqual([
      {
        scope: 'resource',
        scopeKey: 'resource:r1',
        window: '7d',
        limitType: 'cost',
        usage: 1,
        limit: 1,
        unit: 'USD',
        threshold: 'hard',
        source: 'request',
      },
    ]);
  });

  it('warns at the soft threshold without denying', () => {
    const d = decide(
      [limit({ maxTotalTokens: 1000, warnAtPercent: 80 })],
      usage({ inputTokens: 800 }),
      undefined,
      settings(),
    );
    expect(d.decision).toBe('allow');
    expect(d.warnings).toEqual([
      expect.objectContaining({ limitType: 'totalTokens', threshold: 'soft', usage: 800, limit: 1000 }),
    ]);
  });

  describe('money in several units', () => {
    const mixed = usage({ costByUnit: { USD: $(1), JPY: $(1000), EUR: $(3) } });

    it('given no rates, then only the limit unit counts and each other unit is a warning naming it', () => {
      const d = decide([limit({ maxCostMicros: $(5) })], mixed, undefined, settings());
      expect(d.decision).toBe('allow');
      expect(d.warnings.map((w) => [w.unit, w.usage, w.reason !== undefined])).toEqual([
        ['JPY', 1000, true],
        ['EUR', 3, true],
      ]);
    });

    it('given the project rates, then every unit is converted into the limit unit', () => {
      const d = decide(
        [limit({ maxCostMicros: $(5) })],
        mixed,
        undefined,
        settings({ money: { base: 'USD', rates: { JPY: 0.0067, EUR: 1.1 } } }),
      );
      expect(d.decision).toBe('deny');
      expect(d.violations[0]).toMatchObject({ unit: 'USD', limit: 5 });
      expect(d.violations[0].usage).toBeCloseTo(11, 6);
    });

    it('given a limit in JPY, then USD usage is converted into JPY', () => {
      const d = decide(
        [limit({ maxCostMicros: $(500), costUnit: 'JPY' })],
        usage({ costByUnit: usd(4) }),
        undefined,
        settings({ money: { base: 'USD', rates: { JPY: 0.0067 } } }),
      );
      expect(d.decision).toBe('deny');
      expect(d.violations[0]).toMatchObject({ unit: 'JPY' });
      expect(d.violations[0].usage).toBeCloseTo(4 / 0.0067, 3);
    });

    it('given an estimate in a unit with no rate, then the cost limit cannot be shown to hold: deny', () => {
      const d = decide(
        [limit({ maxCostMicros: $(5) })],
        new Map(),
        estimate({ costMicros: $(0.01), costUnit: 'EUR' }),
        settings(),
      );
      expect(d.decision).toBe('deny');
      expect(d.violations[0].reason).toContain('EUR');
    });
  });

  describe('steps with no price', () => {
    const unpriced = estimate({
      costMicros: null,
      costUnit: null,
      priced: false,
      inputTokens: 1000,
      outputTokens: 1000,
    });

    it('given the default policy (deny), when an unpriced step meets a cost limit, then it is denied', () => {
      const d = decide([limit({ maxCostMicros: $(1) })], new Map(), unpriced, settings());
      expect(d.decision).toBe('deny');
      expect(d.violations[0].reason).toContain('no price');
    });

    it('given recorded unpriced usage and a fallback rate, then it counts at that rate', () => {
      const u = usage({ unpricedEvents: 1, unpricedInputTokens: 1_000_000, unpricedOutputTokens: 0 });
      const d = decide(
        [limit({ maxCostMicros: $(1) })],
        u,
        undefined,
        settings({
          unpricedPolicy: 'fallback',
          fallback: { inputPerMillion: 1, outputPerMillion: 4, currency: 'USD' },
        }),
      );
      expect(d.decision).toBe('deny');
      expect(d.violations[0].usage).toBe(1);
    });

    it('given count_tokens (the old default), then an unpriced step passes a cost limit', () => {
      expect(
        decide([limit({ maxCostMicros: $(1) })], new Map(), unpriced, settings({ unpricedPolicy: 'count_tokens' }))
          .decision,
      ).toBe('allow');
    });

    it('given a token limit only, then an unpriced step is judged on its tokens', () => {
      expect(decide([limit({ maxTotalTokens: 10_000 })], new Map(), unpriced, settings()).decision).toBe('allow');
    });
  });
});

describe('decideInOrder (a group commit)', () => {
  const at = new Date('2026-12-01T12:00:00Z');
  let n = 0;
  const ctx = { at, reservationTtlMs: 60_000, newId: () => `id${++n}` };
  const reserving = (over: Partial<CheckCase> = {}): CheckCase => ({
    context: { resourceId: 'r1', traceId: `t${++n}` },
    limits: [limit({ maxCostMicros: $(0.0631), window: '24h' })],
    estimate: estimate({ costMicros: 4500, inputTokens: 1000, rawInputTokens: 1000, outputTokens: 200 }),
    reserve: true,
    audit: true,
    stepId: `s${++n}`,
    contextKeys: ['resource:r1'],
    ...over,
  });

  it('given 20 checks on a budget that fits 14, when decided together, then exactly the first 14 reserve', () => {
    const u = new Map([[usageKey('resource:r1', '24h'), emptyUsage()]]);
    const outcomes = decideInOrder(
      Array.from({ length: 20 }, () => reserving()),
      u,
      settings(),
      ctx,
    );
    expect(outcomes.map((o) => o.decision.decision)).toEqual([...Array(14).fill('allow'), ...Array(6).fill('deny')]);
    expect(outcomes.filter((o) => o.reservation)).toHaveLength(14);
    // Each saw the reservations of those before it.
    expect(outcomes[13].usage.get(usageKey('resource:r1', '24h'))!.reservedCostByUnit.USD).toBe(13 * 4500);
    expect(outcomes[14].decision.violations[0].usage).toBeCloseTo(0.0675, 9);
    expect(u.get(usageKey('resource:r1', '24h'))!.reservedCostByUnit.USD).toBe(14 * 4500);
  });

  it('then logs one BudgetReserved per reservation and one GuardDecided per denial, in the service namespace', () => {
    const outcomes = decideInOrder(
      [reserving(), reserving({ limits: [limit({ maxCostMicros: 1, window: '24h' })] })],
      new Map(),
      settings(),
      ctx,
    );
    expect(outcomes[0].events.map((e) => e.type)).toEqual(['BudgetReserved']);
    expect(outcomes[1].events.map((e) => e.type)).toEqual(['GuardDecided']);
    for (const e of outcomes.flatMap((o) => o.events)) expect(e.eventId.startsWith('tg:')).toBe(true);
  });

  it('given tentative checks, then one that fits reserves and one with anything to report holds and logs nothing', () => {
    const key = usageKey('resource:r1', '24h');
    const u = new Map([[key, emptyUsage()]]);
    const warned = limit({ maxCostMicros: $(0.0631), window: '24h', warnAtPercent: 50 });
    const outcomes = decideInOrder(
      [
        ...Array.from({ length: 7 }, () => reserving({ tentative: true })),
        reserving({ tentative: true, limits: [warned] }), // the 8th passes 50%: a warning
        ...Array.from({ length: 7 }, () => reserving()),
        reserving({ tentative: true }), // the 15th reservation would not fit
        reserving(),
      ],
      u,
      settings(),
      ctx,
    );
    expect(outcomes.map((o) => Boolean(o.reservation))).toEqual([
      ...Array(7).fill(true),
      false,
      ...Array(7).fill(true),
      false,
      false,
    ]);
    expect(outcomes[7]).toMatchObject({ declined: true, events: [], decision: { decision: 'allow' } });
    expect(outcomes[7].decision.warnings).toHaveLength(1);
    expect(outcomes[15]).toMatchObject({ declined: true, events: [], decision: { decision: 'deny' } });
    // The one that was not tentative is decided and logged as ever.
    expect(outcomes[16].declined).toBeUndefined();
    expect(outcomes[16].events.map((e) => e.type)).toEqual(['GuardDecided']);
    expect(u.get(key)!.reservedCostByUnit.USD).toBe(14 * 4500);
  });

  it('holds only the scopes a limit was checked on', () => {
    const [o] = decideInOrder(
      [reserving({ context: { resourceId: 'r1', userId: 'u1' }, contextKeys: ['resource:r1', 'user:u1'] })],
      new Map(),
      settings(),
      ctx,
    );
    expect(o.reservation).toMatchObject({ scopeKeys: ['resource:r1'], contextKeys: ['resource:r1', 'user:u1'] });
  });

  it('adds a reservation to every window of the scope it holds', () => {
    const u = new Map([
      [usageKey('resource:r1', '24h'), emptyUsage()],
      [usageKey('resource:r1', '1h'), emptyUsage()],
      [usageKey('resource:r1@1h', '1h'), emptyUsage()],
    ]);
    decideInOrder([reserving()], u, settings(), ctx);
    expect(u.get(usageKey('resource:r1', '1h'))!.reservedInputTokens).toBe(1000);
    expect(u.get(usageKey('resource:r1@1h', '1h'))!.reservedInputTokens).toBe(0);
  });
});

describe('decideStep with onExceed (given a step that does not fit at its full size, when the caller can run it shorter, then …)', () => {
  // gpt-4o at $2 / M input and $10 / M output: 1,000 input tokens are 2,000 micro-USD, each output token 10.
  const priced = (outputTokens: number) =>
    estimate({
      inputTokens: 1000,
      rawInputTokens: 1000,
      outputTokens,
      costMicros: 2000 + outputTokens * 10,
      costAt: (k) => 2000 + k * 10,
    });
  const step = priced(1000); // $0.012 at its full size
  const spent = usage({ costByUnit: usd(0.02) });
  const shrinkable = limit({ maxCostMicros: $(0.025), onExceed: 'shrink' });

  it('given $0.02 spent of $0.025, then it is allowed with the most output tokens that fit: 299 (cost $0.02499 < $0.025)', () => {
    const d = decideStep([shrinkable], spent, step, settings(), { minOutputTokens: 100 });
    expect(d.decision.decision).toBe('allow');
    expect(d.decision.violations).toEqual([]);
    expect(d.adjust).toEqual({
      maxOutputTokens: 299,
      requestedMaxOutputTokens: 1000,
      limitedBy: [
        {
          scope: 'resource',
          scopeKey: 'resource:r1',
          window: '7d',
          limitType: 'cost',
          usage: 0.032,
          limit: 0.025,
          unit: 'USD',
          threshold: 'hard',
          source: 'request',
        },
      ],
    });
    expect(d.estimate).toMatchObject({ outputTokens: 299, costMicros: 4990, inputTokens: 1000 });
    // What the full step would have broken is reported as a warning, with why it was let run.
    expect(d.decision.warnings).toEqual([
      expect.objectContaining({
        limitType: 'cost',
        usage: 0.032,
        reason: 'the step was shrunk to 299 output tokens (of 1000) to fit',
      }),
    ]);
  });

  it('given a shrunk step, then one more output token would reach the limit (reached counts)', () => {
    expect(decide([shrinkable], spent, priced(299), settings()).decision).toBe('allow');
    expect(decide([shrinkable], spent, priced(300), settings()).decision).toBe('deny');
  });

  it('given the floor above what fits, then the full step is denied as before', () => {
    const d = decideStep([shrinkable], spent, step, settings(), { minOutputTokens: 300 });
    expect(d.decision.decision).toBe('deny');
    expect(d.adjust).toBeUndefined();
    expect(d.estimate).toBe(step);
  });

  it('given the floor exactly what fits, then that many', () => {
    expect(decideStep([shrinkable], spent, step, settings(), { minOutputTokens: 299 }).adjust?.maxOutputTokens).toBe(
      299,
    );
  });

  it('given a caller that cannot shrink (no floor sent), then a shrinkable limit still denies', () => {
    expect(decideStep([shrinkable], spent, step, settings()).decision.decision).toBe('deny');
  });

  it("given a limit that must block (onExceed 'block', the default), then the step is denied although a shorter one would fit", () => {
    const d = decideStep([limit({ maxCostMicros: $(0.025) })], spent, step, settings(), { minOutputTokens: 1 });
    expect(d.decision.decision).toBe('deny');
    expect(d.adjust).toBeUndefined();
  });

  it('given a blocking policy beside a shrinkable limit, then the policy decides only when it is the one broken', () => {
    const policy = limit({ maxCostMicros: $(1), source: 'policy:monthly' }); // far from reached
    expect(
      decideStep([shrinkable, policy], spent, step, settings(), { minOutputTokens: 1 }).adjust?.maxOutputTokens,
    ).toBe(299);
    const tight = limit({ maxCostMicros: $(0.03), source: 'policy:tight' }); // the full step ($0.032) breaks it too
    expect(decideStep([shrinkable, tight], spent, step, settings(), { minOutputTokens: 1 }).decision.decision).toBe(
      'deny',
    );
  });

  it('given an output-token limit, then it shrinks to stay under it too', () => {
    const d = decideStep(
      [limit({ maxOutputTokens: 5000, onExceed: 'shrink' })],
      usage({ outputTokens: 4500 }),
      step,
      settings(),
      { minOutputTokens: 1 },
    );
    expect(d.adjust?.maxOutputTokens).toBe(499);
  });

  it('given an input-token limit the prompt alone breaks, then no shorter answer helps: denied', () => {
    const d = decideStep([limit({ maxInputTokens: 1000, onExceed: 'shrink' })], new Map(), step, settings(), {
      minOutputTokens: 1,
    });
    expect(d.decision.decision).toBe('deny');
  });

  it('given an unpriced model (unpricedPolicy deny), then no shorter answer helps: denied', () => {
    const unpriced = estimate({
      outputTokens: 1000,
      costMicros: null,
      costUnit: null,
      priced: false,
      costAt: () => null,
    });
    expect(decideStep([shrinkable], spent, unpriced, settings(), { minOutputTokens: 1 }).decision.decision).toBe(
      'deny',
    );
  });

  it('given a step that fits, then it is left as asked', () => {
    const d = decideStep([shrinkable], usage(), step, settings(), { minOutputTokens: 1 });
    expect(d).toEqual({ decision: { decision: 'allow', violations: [], warnings: [] }, estimate: step });
  });

  it('given a group commit, then the shrunk step reserves its shrunk size and the next check sees it', () => {
    const at = new Date('2026-12-01T12:00:00Z');
    let n = 0;
    const ctx = { at, reservationTtlMs: 60_000, newId: () => `id${++n}` };
    const check = (stepId: string): CheckCase => ({
      context: { resourceId: 'r1' },
      limits: [shrinkable],
      estimate: step,
      shrink: { minOutputTokens: 50 },
      reserve: true,
      audit: true,
      stepId,
      contextKeys: ['resource:r1'],
    });
    const u = usage({ costByUnit: usd(0.01) });
    const [first, second, third] = decideInOrder([check('s1'), check('s2'), check('s3')], u, settings(), ctx);
    expect(first.adjust).toBeUndefined(); // $0.01 + $0.012 fits
    expect(first.reservation).toMatchObject({ costMicros: 12_000, outputTokens: 1000 });
    // 22,000 micro-USD held of 25,000: 2,000 + 10 k < 3,000, so k = 99.
    expect(second.adjust?.maxOutputTokens).toBe(99);
    expect(second.reservation).toMatchObject({ costMicros: 2990, outputTokens: 99, inputTokens: 1000 });
    expect(second.events.map((e) => e.type)).toEqual(['BudgetReserved', 'GuardDecided']);
    expect(third.decision.decision).toBe('deny'); // 10 micro-USD left: not even the prompt fits
    expect(third.reservation).toBeUndefined();
    expect(u.get(usageKey('resource:r1', '7d'))!.reservedCostByUnit.USD).toBe(12_000 + 2990);
  });
});

describe("hold (given a batch's usage, when a reservation is made, then …)", () => {
  it('adds it to every window of the scopes it holds, and to nothing else', () => {
    const keys = ['resource:r1', 'resource:r1@1h', 'resource:r1@365d', 'resource:r10@1h', 'user:u1@1h', 'run:t1'];
    const u = new Map(keys.map((k) => [k, emptyUsage()]));
    hold(u, newReservation('rsv_1', { scopeKeys: ['resource:r1', 'run:t1'] }));
    expect(
      Object.fromEntries([...u].map(([k, v]) => [k, [v.reservedInputTokens, v.reservedCostByUnit.USD ?? 0]])),
    ).toEqual({
      'resource:r1': [1000, 4500],
      'resource:r1@1h': [1000, 4500],
      'resource:r1@365d': [1000, 4500],
      'resource:r10@1h': [0, 0],
      'user:u1@1h': [0, 0],
      'run:t1': [1000, 4500],
    });
  });
});
