import { heldInputTokens, marginFromBins, seedMargin } from './estimate-margins';

describe('estimate margins', () => {
  it('given no settlements yet, when a Claude step is reserved, then the seed covers a 1.3× tokenizer', () => {
    expect(seedMargin('anthropic')).toBeGreaterThanOrEqual(1.3);
    expect(seedMargin('anthropic.messages')).toBe(seedMargin('anthropic'));
    expect(marginFromBins(new Map([[16, 5]]), 'anthropic')).toBe(seedMargin('anthropic'));
  });

  it('given an unknown family, then the largest seed applies', () => {
    expect(seedMargin('acme')).toBeGreaterThanOrEqual(seedMargin('anthropic'));
  });

  it('given enough settlements, then the margin is the upper edge of the 95th-percentile bin', () => {
    // 19 steps at (0.95, 1.00] and 1 at (1.25, 1.30]: the 95th percentile is the 19th step.
    expect(
      marginFromBins(
        new Map([
          [10, 19],
          [16, 1],
        ]),
        'openai',
      ),
    ).toBe(1);
    // 18 at 1.00, 2 at 1.30: the 19th is in the 1.30 bin.
    expect(
      marginFromBins(
        new Map([
          [10, 18],
          [16, 2],
        ]),
        'openai',
      ),
    ).toBe(1.3);
  });

  it('is bounded: never below 1, never above 3', () => {
    expect(marginFromBins(new Map([[0, 50]]), 'openai')).toBe(1);
    expect(marginFromBins(new Map([[69, 50]]), 'openai')).toBe(3);
  });

  it('rounds held tokens up', () => {
    expect(heldInputTokens(10_000, 1.35)).toBe(13_500);
    expect(heldInputTokens(3, 1.05)).toBe(4);
    expect(heldInputTokens(10_000, 1.3)).toBe(13_000);
    expect(heldInputTokens(100, 1)).toBe(100);
  });
});
