import {
  catalogCost,
  catalogCostUncached,
  normalizeModel,
  normalizeProvider,
  overrideAt,
  priceStep,
  type PriceOverrideRate,
} from './price-step';

const usage = { inputTokens: 1_000_000, outputTokens: 100_000 };
const at = new Date('2026-06-01T00:00:00Z');
const rate = (over: Partial<PriceOverrideRate>): PriceOverrideRate => ({
  id: 'r1',
  provider: 'openai',
  model: 'gpt-4o',
  effectiveFrom: new Date('2026-01-01T00:00:00Z'),
  currency: 'USD',
  inputPerMillion: 1,
  outputPerMillion: 2,
  ...over,
});

describe('priceStep', () => {
  it('prices a known model from the catalog, input and output apart, in micro-units', () => {
    const cost = priceStep({ provider: 'openai', model: 'gpt-4o', usage }, at, []);
    expect(cost).toEqual({
      priced: true,
      costMicros: 3_500_000n,
      inputCostMicros: 2_500_000n,
      outputCostMicros: 1_000_000n,
      currency: 'USD',
      source: 'catalog',
      priceId: 'genai-prices:openai/gpt-4o',
    });
  });

  it('recognises SDK-style provider ids and provider-prefixed model names', () => {
    expect(normalizeProvider('openai.responses')).toBe('openai');
    expect(normalizeModel('openai.chat', 'openai/gpt-4o')).toBe('gpt-4o');
    const cost = priceStep({ provider: 'openai.chat', model: 'openai/gpt-4o', usage }, at, []);
    expect(cost).toMatchObject({ priced: true, costMicros: 3_500_000n });
  });

  it('charges cache reads at the cache rate, as part of the input', () => {
    const cost = priceStep(
      {
        provider: 'openai',
        model: 'gpt-4o',
        usage: { inputTokens: 1_000_000, outputTokens: 0, cacheReadTokens: 1_000_000 },
      },
      at,
      [],
    );
    expect(cost).toMatchObject({ inputCostMicros: 1_250_000n, outputCostMicros: 0n });
  });

  // claude-sonnet-4: $3 input, $3.75 per million 5-minute cache writes, $6 per million 1-hour ones, $15 output.
  const cached = { inputTokens: 1100, outputTokens: 200, cacheWriteTokens: 1000, cacheWrite1hTokens: 400 };

  it('charges 1-hour cache writes at the 1-hour rate and the other writes at the 5-minute rate', () => {
    // 100 × 3 + 600 × 3.75 + 400 × 6 = 300 + 2,250 + 2,400 input; 200 × 15 = 3,000 output.
    const cost = priceStep({ provider: 'anthropic', model: 'claude-sonnet-4-20250514', usage: cached }, at, []);
    expect(cost).toEqual({
      priced: true,
      costMicros: 7950n,
      inputCostMicros: 4950n,
      outputCostMicros: 3000n,
      currency: 'USD',
      source: 'catalog',
      priceId: 'genai-prices:anthropic/claude-sonnet-4-0',
    });
    // Without the split every write is a 5-minute one: 100 × 3 + 1,000 × 3.75.
    const { cacheWrite1hTokens: _, ...unsplit } = cached;
    expect(
      priceStep({ provider: 'anthropic', model: 'claude-sonnet-4-20250514', usage: unsplit }, at, []),
    ).toMatchObject({ inputCostMicros: 4050n });
    // The catalog's own figure for a million writes, 400,000 of them 1-hour ones: $4.65.
    const million = priceStep(
      {
        provider: 'anthropic',
        model: 'claude-sonnet-4-20250514',
        usage: { inputTokens: 1e6, outputTokens: 0, cacheWriteTokens: 1e6, cacheWrite1hTokens: 4e5 },
      },
      at,
      [],
    );
    expect(million).toMatchObject({ inputCostMicros: 4_650_000n });
  });

  it("charges 1-hour cache writes at an override's 1-hour rate, or its cache-write rate when it has none", () => {
    const override = rate({
      provider: 'anthropic',
      model: 'claude-sonnet-4-20250514',
      inputPerMillion: 3,
      outputPerMillion: 15,
      cacheWritePerMillion: 3.75,
    });
    // 100 × 3 + 600 × 3.75 + 400 × 7.5 = 300 + 2,250 + 3,000.
    expect(
      priceStep({ provider: 'anthropic', model: 'claude-sonnet-4-20250514', usage: cached }, at, [
        { ...override, cacheWrite1hPerMillion: 7.5 },
      ]),
    ).toEqual({
      priced: true,
      costMicros: 8550n,
      inputCostMicros: 5550n,
      outputCostMicros: 3000n,
      currency: 'USD',
      source: 'override',
      priceId: 'override:r1',
    });
    // 100 × 3 + 1,000 × 3.75.
    expect(
      priceStep({ provider: 'anthropic', model: 'claude-sonnet-4-20250514', usage: cached }, at, [override]),
    ).toMatchObject({ costMicros: 7050n, inputCostMicros: 4050n });
    // Neither cache-write rate: every write at the input rate, 1,100 × 3.
    expect(
      priceStep({ provider: 'anthropic', model: 'claude-sonnet-4-20250514', usage: cached }, at, [
        { ...override, cacheWritePerMillion: null },
      ]),
    ).toMatchObject({ inputCostMicros: 3300n });
  });

  it('leaves an unknown model unpriced rather than free', () => {
    expect(priceStep({ provider: 'acme', model: 'nope-1', usage }, at, [])).toEqual({ priced: false });
  });

  it("uses the project's override in force, over the catalog", () => {
    const cost = priceStep({ provider: 'openai', model: 'gpt-4o', usage }, at, [rate({})]);
    expect(cost).toEqual({
      priced: true,
      costMicros: 1_200_000n,
      inputCostMicros: 1_000_000n,
      outputCostMicros: 200_000n,
      currency: 'USD',
      source: 'override',
      priceId: 'override:r1',
    });
  });

  it('lets a provider-reported cost win, split like the known rates', () => {
    const cost = priceStep(
      { provider: 'openai', model: 'gpt-4o', usage, cost: { amount: 7, currency: 'USD' } },
      at,
      [],
    );
    expect(cost).toEqual({
      priced: true,
      costMicros: 7_000_000n,
      inputCostMicros: 5_000_000n,
      outputCostMicros: 2_000_000n,
      currency: 'USD',
      source: 'provider',
      priceId: null,
    });
  });

  it('splits a reported cost by tokens when the model has no known price', () => {
    const cost = priceStep(
      {
        provider: 'acme',
        model: 'x',
        usage: { inputTokens: 300, outputTokens: 100 },
        cost: { amount: 0.004, currency: 'EUR' },
      },
      at,
      [],
    );
    expect(cost).toMatchObject({ costMicros: 4000n, inputCostMicros: 3000n, outputCostMicros: 1000n, currency: 'EUR' });
  });
});

describe('overrideAt', () => {
  const rates = [
    rate({ id: 'old', effectiveFrom: new Date('2026-01-01T00:00:00Z') }),
    rate({ id: 'new', effectiveFrom: new Date('2026-03-01T00:00:00Z') }),
  ];
  it.each([
    ['2025-12-31T23:59:59.999Z', undefined],
    ['2026-01-01T00:00:00.000Z', 'old'],
    ['2026-02-28T23:59:59.999Z', 'old'],
    ['2026-03-01T00:00:00.000Z', 'new'],
  ])('at %s uses %s', (when, id) => {
    expect(overrideAt(rates, 'openai', 'gpt-4o', new Date(when))?.id).toBe(id);
  });
  it('matches provider and model only', () => {
    expect(overrideAt(rates, 'openai', 'gpt-4o-mini', at)).toBeUndefined();
    expect(overrideAt(rates, 'azure', 'gpt-4o', at)).toBeUndefined();
  });
});

describe('catalog rate cache', () => {
  const models: [string, string][] = [
    ['openai', 'gpt-4o'],
    ['openai', 'gpt-4o-mini'],
    ['openai', 'gpt-4.1'],
    ['openai', 'o3-mini'],
    ['openai', 'gpt-4o-audio-preview'],
    ['anthropic', 'claude-sonnet-4-0'],
    ['anthropic', 'claude-sonnet-4-5'],
    ['anthropic', 'claude-3-5-haiku-latest'],
    ['google', 'gemini-2.5-pro'],
    ['google', 'gemini-2.5-flash'],
  ];
  let seed = 42;
  const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;

  it.each(models)('prices %s/%s exactly as the catalog does, tiers included', (provider, model) => {
    for (let i = 0; i < 200; i++) {
      const inputTokens = rand(400_000);
      const cacheReadTokens = rand(2) ? rand(inputTokens + 1) : 0;
      const cacheWriteTokens = rand(2) ? rand(inputTokens - cacheReadTokens + 1) : 0;
      const cacheWrite1hTokens = rand(2) ? rand(cacheWriteTokens + 1) : 0;
      const usage = { inputTokens, outputTokens: rand(20_000), cacheReadTokens, cacheWriteTokens, cacheWrite1hTokens };
      const when = new Date(Date.UTC(2025, rand(12), 1 + rand(28)));
      const fast = catalogCost(usage, provider, model, when);
      const reference = catalogCostUncached(usage, provider, model, when);
      expect(fast === null).toBe(reference === null);
      if (fast && reference) {
        expect(Math.round(fast.input * 1e6)).toBe(Math.round(reference.input * 1e6));
        expect(Math.round(fast.output * 1e6)).toBe(Math.round(reference.output * 1e6));
      }
    }
  });
});
