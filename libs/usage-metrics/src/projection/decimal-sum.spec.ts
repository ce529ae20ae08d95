import { DecimalSum } from './decimal-sum';

describe('DecimalSum', () => {
  it('adds the decimals JS prints, exactly, in any order', () => {
    const xs = [0.1, 0.2, 1234.5678, 1e-7, 3, 2.5e21, 0];
    const a = new DecimalSum();
    xs.forEach((x) => a.add(x));
    const b = new DecimalSum();
    [...xs].reverse().forEach((x) => b.add(x));
    expect(a.toString()).toBe('2500000000000000001237.8678001');
    expect(b.toString()).toBe(a.toString());
  });

  it('prints integers without a point and small fractions with leading zeros', () => {
    expect(new DecimalSum().add(5).add(7).toString()).toBe('12');
    expect(new DecimalSum().add(0.001).toString()).toBe('0.001');
    expect(new DecimalSum().toString()).toBe('0');
  });
});

describe('DecimalSum with integers past 2^53', () => {
  it('stays exact when the fast integer sum would not', () => {
    const s = new DecimalSum().add(Number.MAX_SAFE_INTEGER).add(2).add(0.5);
    expect(s.toString()).toBe('9007199254740993.5');
  });
});
