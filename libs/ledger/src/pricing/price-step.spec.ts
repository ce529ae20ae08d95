import { catalogCost, catalogCostUncached, normalizeModel, normalizeProvider, overrideAt, priceStep, type PriceOverrideRate } from './price-step';

const usage = { inputTokens: 1_000_000, outputTokens: 100_000 };
const at = new Date('2026-06-01T00:00:00Z');
const rate = (over: Partial<PriceOverrideRate>): PriceOverrideRate => ({
  id: 'r1', provider: 'openai', model: 'gpt-4o', effectiveFrom: new Date('2026-01-01T00:00:00Z'), currency: 'USD', inputPerMillion: 1, outputPerMillion: 2, ...over,
});

describe('priceStep', () => {
  it('prices a known model from the catalog, input and output apart, in micro-units', () => {
    const cost = priceStep({ provider: 'openai', model: 'gpt-4o', usage }, at, []);
    expect(cost).toEqual({ priced: true, costMicros: 3_500_000n, inputCostMicros: 2_500_000n, outputCostMicros: 1_000_000n, currency: 'USD', source: 'catalog', priceId: 'genai-prices:openai/gpt-4o' });
  });

  it('recognises SDK-style provider ids and provider-prefixed model names', () => {
    expect(normalizeProvider('openai.responses')).toBe('openai');
    expect(normalizeModel('openai.chat', 'openai/gpt-4o')).toBe('gpt-4o');
    const cost = priceStep({ provider: 'openai.chat', model: 'openai/gpt-4o', usage }, at, []);
    expect(cost).toMatchObject({ priced: true, costMicros: 3_500_000n });
  });

  it('charges cache reads at the cache rate, as part of the input', () => {
    const cost = priceStep({ provider: 'openai', model: 'gpt-4o', usage: { inputTokens: 1_000_000, outputTokens: 0, cacheReadTokens: 1_000_000 } }, at, []);
    expect(cost).toMatchObject({ inputCostMicros: 1_250_000n, outputCostMicros: 0n });
  });

  it('leaves an unknown model unpriced rather than free', () => {
    expect(priceStep({ provider: 'acme', model: 'nope-1', usage }, at, [])).toEqual({ priced: false });
  });

  it("uses the project's override in force, over the catalog", () => {
    const cost = priceStep({ provider: 'openai', model: 'gpt-4o', usage }, at, [rate({})]);
    expect(cost).toEqual({ priced: true, costMicros: 1_200_000n, inputCostMicros: 1_000_000n, outputCostMicros: 200_000n, currency: 'USD', source: 'override', priceId: 'override:r1' });
  });

  it('lets a provider-reported cost win, split like the known rates', () => {
    const cost = priceStep({ provider: 'openai', model: 'gpt-4o', usage, cost: { amount: 7, currency: 'USD' } }, at, []);
    expect(cost).toEqual({ priced: true, costMicros: 7_000_000n, inputCostMicros: 5_000_000n, outputCostMicros: 2_000_000n, currency: 'USD', source: 'provider', priceId: null });
  });

  it('splits a reported cost by tokens when the model has no known price', () => {
    const cost = priceStep({ provider: 'acme', model: 'x', usage: { inputTokens: 300, outputTokens: 100 }, cost: { amount: 0.004, currency: 'EUR' } }, at, []);
    expect(cost).toMatchObject({ costMicros: 4000n, inputCostMicros: 3000n, outputCostMicros: 1000n, currency: 'EUR' });
  });
});

describe('overrideAt', () => {
  const rates = [rate({ id: 'old', effectiveFrom: new Date('2026-01-01T00:00:00Z') }), rate({ id: 'new', effectiveFrom: new Date('2026-03-01T00:00:00Z') })];
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
    ['openai', 'gpt-4o'], ['openai', 'gpt-4o-mini'], ['openai', 'gpt-4.1'], ['openai', 'o3-mini'], ['openai', 'gpt-4o-audio-preview'],
    ['anthropic', 'claude-sonnet-4-0'], ['anthropic', 'claude-3-5-haiku-latest'], ['google', 'gemini-2.5-pro'], ['google', 'gemini-2.5-flash'],
  ];
  let seed = 42;
  const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);

  it.each(models)('prices %s/%s exactly as the catalog does, tiers included', (provider, model) => {
    for (let i = 0; i < 200; i++) {
      const inputTokens = rand(400_000);
      const cacheReadTokens = rand(2) ? rand(inputTokens + 1) : 0;
      const cacheWriteTokens = rand(2) ? rand(inputTokens - cacheReadTokens + 1) : 0;
      const usage = { inputTokens, outputTokens: rand(20_000), cacheReadTokens, cacheWriteTokens };
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
