import type { PriceOverrideRate } from '../pricing/price-step';
import { decideReprice, RepriceTally, UNPRICED } from './reprice-decision';
import type { StepWithCost } from './step-costs.sql';

const AT = new Date('2026-11-20T10:15:00.000Z');
const override = (over: Partial<PriceOverrideRate> = {}): PriceOverrideRate => ({
  id: 'prc_1',
  provider: 'acme',
  model: 'acme-large',
  effectiveFrom: new Date('2026-11-01T00:00:00Z'),
  currency: 'USD',
  inputPerMillion: 2,
  outputPerMillion: 8,
  ...over,
});
const step = (over: Partial<StepWithCost> = {}): StepWithCost => ({
  position: '42',
  eventId: 'step-1',
  occurredAt: AT,
  provider: 'acme',
  model: 'acme-large',
  usage: {
    inputTokens: 1000,
    outputTokens: 200,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
    audioInputTokens: 0,
    imageInputTokens: 0,
  },
  providerReported: false,
  sequence: 0,
  latest: {
    costMicros: null,
    inputCostMicros: null,
    outputCostMicros: null,
    costUnit: null,
    source: null,
    priceId: null,
    unpriced: true,
  },
  ...over,
});
const priced = {
  costMicros: 3600,
  inputCostMicros: 2000,
  outputCostMicros: 1600,
  costUnit: 'USD',
  source: 'override',
  priceId: 'override:prc_1',
  unpriced: false,
};

describe('decideReprice', () => {
  it('prices an unpriced step with the override in force at its occurredAt: the next correction, old and new cost', () => {
    expect(decideReprice(step(), [override()])).toEqual({
      kind: 'changed',
      correction: {
        eventId: 'tg:reprice:step-1:1',
        stepEventId: 'step-1',
        stepPosition: '42',
        occurredAt: AT,
        sequence: 1,
        old: UNPRICED,
        new: {
          costMicros: 3600,
          inputCostMicros: 2000,
          outputCostMicros: 1600,
          costUnit: 'USD',
          priceId: 'override:prc_1',
          source: 'override',
        },
      },
    });
  });

  it('compares with the latest cost (the last correction), and numbers the next correction after it', () => {
    expect(decideReprice(step({ sequence: 2, latest: priced }), [override()])).toEqual({ kind: 'unchanged' });
    const raised = decideReprice(step({ sequence: 2, latest: priced }), [override({ outputPerMillion: 10 })]);
    expect(raised).toMatchObject({
      kind: 'changed',
      correction: {
        eventId: 'tg:reprice:step-1:3',
        sequence: 3,
        old: { costMicros: 3600, priceId: 'override:prc_1' },
        new: { costMicros: 4000 },
      },
    });
  });

  it('leaves a step alone when no price applies at its occurredAt, and a provider-reported cost always', () => {
    expect(decideReprice(step(), [override({ effectiveFrom: new Date(AT.getTime() + 1) })])).toEqual({
      kind: 'unchanged',
    });
    expect(decideReprice(step({ providerReported: true }), [override()])).toEqual({ kind: 'provider_reported' });
  });

  it('reprices a catalog-priced step only when another price now applies', () => {
    const catalog = {
      costMicros: 4500,
      inputCostMicros: 2500,
      outputCostMicros: 2000,
      costUnit: 'USD',
      source: 'catalog',
      priceId: 'genai-prices:openai/gpt-4o',
      unpriced: false,
    };
    const gpt = step({ provider: 'openai', model: 'gpt-4o', latest: catalog });
    expect(decideReprice(gpt, [])).toEqual({ kind: 'unchanged' });
    expect(
      decideReprice(gpt, [override({ provider: 'openai', model: 'gpt-4o', inputPerMillion: 1, outputPerMillion: 1 })]),
    ).toMatchObject({
      kind: 'changed',
      correction: { old: { costMicros: 4500, source: 'catalog' }, new: { costMicros: 1200, source: 'override' } },
    });
  });
});

describe('RepriceTally', () => {
  const range = { dryRun: false, from: new Date('2026-11-01T00:00:00Z'), to: new Date('2026-12-01T00:00:00Z') };

  it('sums new − old per unit, and leaves out units that net to zero', () => {
    const tally = new RepriceTally(range);
    const toUsd = decideReprice(step(), [override()]);
    const toEur = decideReprice(step({ eventId: 'step-2', latest: priced }), [override({ currency: 'EUR' })]);
    const same = decideReprice(
      step({ eventId: 'step-3', latest: { ...priced, costMicros: 3000, inputCostMicros: 1400 } }),
      [override()],
    );
    tally.add([toUsd, toEur, same, { kind: 'unchanged' }, { kind: 'provider_reported' }], null);
    expect(tally.summary()).toEqual({
      dryRun: false,
      from: '2026-11-01T00:00:00.000Z',
      to: '2026-12-01T00:00:00.000Z',
      provider: null,
      model: null,
      scanned: 5,
      repriced: 3,
      unchanged: 1,
      providerReported: 1,
      newlyPriced: 1,
      newlyUnpriced: 0,
      batches: 1,
      // USD: +3600 (newly priced) − 3600 (moved to EUR) + 600 (3000 → 3600).
      deltaByUnit: { EUR: { costMicros: 3600, cost: 0.0036 }, USD: { costMicros: 600, cost: 0.0006 } },
    });
  });

  it('counts a correction another reprice appended first as unchanged', () => {
    const tally = new RepriceTally(range);
    tally.add([decideReprice(step(), [override()])], new Set());
    expect(tally.summary()).toMatchObject({ repriced: 0, unchanged: 1, deltaByUnit: {} });
  });
});
