import { convertMicros } from './money';

describe('convertMicros', () => {
  const rates = { base: 'USD', rates: { JPY: 0.0067, EUR: 1.1 } };

  it('converts through the project unit, rounding up to the micro-unit', () => {
    expect(convertMicros(1000_000_000, 'JPY', 'USD', rates)).toBe(6_700_000);
    expect(convertMicros(3_000_000, 'EUR', 'USD', rates)).toBe(3_300_000);
    expect(convertMicros(1_100_000, 'USD', 'EUR', rates)).toBe(1_000_000);
    expect(convertMicros(1, 'JPY', 'USD', rates)).toBe(1);
  });

  it('has no answer for a unit without a rate', () => {
    expect(convertMicros(5, 'XXX', 'USD', rates)).toBeNull();
    expect(convertMicros(5, 'USD', 'XXX', rates)).toBeNull();
    expect(convertMicros(5, 'XXX', 'XXX', rates)).toBe(5);
  });
});
