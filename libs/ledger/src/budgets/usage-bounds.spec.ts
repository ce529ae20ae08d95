import {
  decide,
  emptyUsage,
  hold,
  usageKey,
  type EffectiveLimit,
  type GuardSettings,
  type NewReservation,
  type StepEstimate,
  type UsageTotals,
} from './guard-decision';
import { boundOf, decidesWithinBounds, loosestBounds, stepRoom, widened, withinBound } from './usage-bounds';

/** A small deterministic generator (mulberry32), so a failure names its seed. */
function random(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)],
  };
}

const KEY = usageKey('resource:r1', '1h');
const within = withinBound;
const plainAllow = (d: ReturnType<typeof decide>) => d.decision === 'allow' && d.warnings.length === 0;

describe('decisions within usage bounds (given a plain allow on some usage, when the usage is within its bound, then …)', () => {
  const settingsOf = (r: ReturnType<typeof random>): GuardSettings =>
    r.pick([
      { unpricedPolicy: 'deny', fallback: null, money: { base: 'USD', rates: {} } },
      { unpricedPolicy: 'count_tokens', fallback: null, money: { base: 'USD', rates: {} } },
      {
        unpricedPolicy: 'fallback',
        fallback: { inputPerMillion: 3, outputPerMillion: 15, currency: 'EUR' },
        money: { base: 'USD', rates: { EUR: 1.1 } },
      },
    ] as GuardSettings[]);
  const limitOf = (r: ReturnType<typeof random>): EffectiveLimit => ({
    scope: 'resource',
    scopeKey: 'resource:r1',
    window: '1h',
    costUnit: 'USD',
    strategy: r.pick(['block', 'warn'] as const),
    source: 'request',
    ...(r.int(2) ? { maxCostMicros: 1 + r.int(40_000) } : {}),
    ...(r.int(2) ? { maxTotalTokens: 1 + r.int(20_000) } : {}),
    ...(r.int(2) ? { maxInputTokens: 1 + r.int(15_000) } : {}),
    ...(r.int(2) ? { maxOutputTokens: 1 + r.int(5_000) } : {}),
    ...(r.int(2) ? { warnAtPercent: 50 + r.int(50) } : {}),
  });
  const usageOf = (r: ReturnType<typeof random>): UsageTotals => {
    const uin = r.int(3) ? 0 : r.int(2_000);
    return {
      ...emptyUsage(),
      inputTokens: uin + r.int(8_000),
      outputTokens: r.int(2_000),
      costByUnit: { USD: r.int(20_000) },
      unpricedEvents: uin ? 1 + r.int(3) : 0,
      unpricedInputTokens: uin,
      unpricedOutputTokens: uin ? r.int(500) : 0,
      reservedInputTokens: r.int(4_000),
      reservedOutputTokens: r.int(1_000),
      reservedCostByUnit: { USD: r.int(20_000) },
    };
  };
  /** Usage a while later, within the bound: held steps settled for at most what they held, others aged out. */
  const laterOf = (r: ReturnType<typeof random>, c: UsageTotals): UsageTotals => {
    const part = (n: number) => r.int(n + 1);
    const settledIn = part(c.reservedInputTokens);
    const settledOut = part(c.reservedOutputTokens);
    const settledCost = part(c.reservedCostByUnit.USD ?? 0);
    const unpriced = part(c.unpricedInputTokens);
    return {
      ...emptyUsage(),
      inputTokens:
        c.inputTokens -
        c.unpricedInputTokens +
        unpriced -
        part(c.inputTokens - c.unpricedInputTokens) +
        part(settledIn),
      outputTokens: c.outputTokens - part(c.outputTokens) + part(settledOut),
      costByUnit: { USD: (c.costByUnit.USD ?? 0) - part(c.costByUnit.USD ?? 0) + part(settledCost) },
      unpricedEvents: unpriced ? Math.min(c.unpricedEvents, 1 + part(c.unpricedEvents)) : 0,
      unpricedInputTokens: unpriced,
      unpricedOutputTokens: unpriced ? part(c.unpricedOutputTokens) : 0,
      reservedInputTokens: c.reservedInputTokens - settledIn,
      reservedOutputTokens: c.reservedOutputTokens - settledOut,
      reservedCostByUnit: { USD: (c.reservedCostByUnit.USD ?? 0) - settledCost },
    };
  };

  it('stays a plain allow: 20,000 random cases of limits, policies, usage and a later usage within it', () => {
    let checked = 0;
    for (let seed = 1; seed <= 20_000; seed++) {
      const r = random(seed);
      const limits = [limitOf(r), ...(r.int(2) ? [limitOf(r)] : [])];
      const settings = settingsOf(r);
      const estimate: StepEstimate | undefined = r.int(4)
        ? {
            provider: 'openai',
            model: 'gpt-4o',
            rawInputTokens: 1000,
            inputTokens: r.int(3_000),
            outputTokens: r.int(1_000),
            margin: 1,
            costMicros: r.int(5) ? r.int(8_000) : null,
            costUnit: 'USD',
            priced: true,
          }
        : undefined;
      const known = usageOf(r);
      if (!decidesWithinBounds(limits, [known])) continue;
      if (!plainAllow(decide(limits, new Map([[KEY, known]]), estimate, settings))) continue;
      const later = laterOf(r, known);
      if (!within(boundOf(later), boundOf(known))) continue;
      checked += 1;
      expect({ seed, decision: decide(limits, new Map([[KEY, later]]), estimate, settings) }).toEqual({
        seed,
        decision: { decision: 'allow', violations: [], warnings: [] },
      });
    }
    // Enough of the cases were plain allows with a later usage within the bound to mean something.
    expect(checked).toBeGreaterThan(1_000);
  });

  it('is not relied on where money is converted: a step settling can add a micro-unit to a converted amount', () => {
    const limits: EffectiveLimit[] = [
      {
        scope: 'resource',
        scopeKey: 'resource:r1',
        window: '1h',
        costUnit: 'USD',
        maxCostMicros: 2,
        strategy: 'block',
        source: 'request',
      },
    ];
    const settings: GuardSettings = {
      unpricedPolicy: 'deny',
      fallback: null,
      money: { base: 'USD', rates: { JPY: 0.5 } },
    };
    const known = { ...emptyUsage(), costByUnit: { JPY: 2 } }; // 1 USD micro-unit
    const later = { ...emptyUsage(), costByUnit: { JPY: 1 }, reservedCostByUnit: { JPY: 1 } }; // 1 + 1, each rounded up
    expect(within(boundOf(later), boundOf(known))).toBe(true);
    expect(decide(limits, new Map([[KEY, known]]), undefined, settings).decision).toBe('allow');
    expect(decide(limits, new Map([[KEY, later]]), undefined, settings).decision).toBe('deny');
    expect(decidesWithinBounds(limits, [known])).toBe(false);
    // Limits in two units, whatever the usage: not relied on either.
    expect(decidesWithinBounds([limits[0], { ...limits[0], costUnit: 'EUR' }], [emptyUsage()])).toBe(false);
    // Tokens only, or money in the limits' one unit: relied on.
    expect(decidesWithinBounds([{ ...limits[0], maxCostMicros: undefined }], [known])).toBe(true);
    expect(decidesWithinBounds(limits, [{ ...emptyUsage(), costByUnit: { USD: 5 } }])).toBe(true);
  });
});

describe('the room above a guess (given a batch decided on a guessed usage, when the bounds it is written within are chosen, then …)', () => {
  const limits: EffectiveLimit[] = [
    {
      scope: 'resource',
      scopeKey: 'resource:r1',
      window: '1h',
      costUnit: 'USD',
      maxTotalTokens: 40_000,
      strategy: 'block',
      source: 'request',
    },
  ];
  const settings: GuardSettings = { unpricedPolicy: 'deny', fallback: null, money: { base: 'USD', rates: {} } };
  const step = { inputTokens: 1000, outputTokens: 200, costMicros: 4500, costUnit: 'USD' } as NewReservation;
  const estimate: StepEstimate = {
    provider: 'openai',
    model: 'gpt-4o',
    rawInputTokens: 1000,
    inputTokens: 1000,
    outputTokens: 200,
    margin: 1,
    costMicros: 4500,
    costUnit: 'USD',
    priced: true,
  };
  const seen: UsageTotals[] = [];
  /** The batch, one step, decided again: a plain allow on the usage it is given (recorded, for the specs). */
  const keeps = (usage: Map<string, UsageTotals>) => {
    seen.push(usage.get(KEY)!);
    const ok = plainAllow(decide(limits, usage, estimate, settings));
    hold(usage, { ...step, scopeKeys: ['resource:r1'] } as NewReservation);
    return ok;
  };
  const used = (tokens: number): UsageTotals => ({ ...emptyUsage(), inputTokens: tokens, costByUnit: { USD: 9 } });
  const boundsAt = (tokens: number) => loosestBounds(new Map([[KEY, used(tokens)]]), stepRoom([step]), keeps).get(KEY);

  it('far from the limit: 16 steps of room in tokens and money, so a step settling at other counts costs no round trip', () => {
    expect(boundsAt(0)).toEqual(boundOf(widened(used(0), stepRoom([step]), 16)));
    expect(boundsAt(0)).toMatchObject({
      tin: 16_000,
      tout: 3_200,
      cost: { USD: 9 + 16 * 4500 },
      ev: 0,
      uin: 0,
      uout: 0,
    });
    // Another agent's step, or this one settling with 100 more input tokens than it held: within.
    expect(withinBound(boundOf({ ...used(1100), outputTokens: 80 }), boundsAt(0)!)).toBe(true);
  });

  it('nearer the limit: the most room under which the step still fits', () => {
    // 16 steps (19,200 tokens) over 20,000 no longer fit 40,000 with the step; 4 do.
    expect(boundsAt(20_000)).toMatchObject({ tin: 24_000, tout: 800 });
    // One step of room: 37,600 + 1,200 < 40,000.
    expect(boundsAt(36_400)).toMatchObject({ tin: 37_400, tout: 200 });
  });

  it('at the limit: the guess itself, so any growth sends the batch the long way', () => {
    expect(boundsAt(38_000)).toEqual(boundOf(used(38_000)));
  });

  it('decides again on a copy: what the batch holds while deciding is not in the bounds', () => {
    seen.length = 0;
    const guess = used(0);
    const bounds = loosestBounds(new Map([[KEY, guess]]), stepRoom([step]), keeps).get(KEY)!;
    expect(seen[0].reservedInputTokens).toBe(1000);
    expect(bounds.tin).toBe(16_000);
    expect(guess).toEqual(used(0));
  });

  it('a batch of steps of different sizes: room of the largest of them', () => {
    const other = { ...step, inputTokens: 3000, outputTokens: 100, costMicros: 9000 } as NewReservation;
    expect(stepRoom([step, other])).toEqual({ inputTokens: 3000, outputTokens: 200, cost: { USD: 9000 } });
    // A step without a price adds no money to the room.
    expect(stepRoom([{ ...step, costUnit: '', costMicros: 0 } as NewReservation])).toEqual({
      inputTokens: 1000,
      outputTokens: 200,
      cost: {},
    });
  });
});
