import { ReapedUntil } from './reaped-until';

describe('ReapedUntil', () => {
  it('knows nothing of a scope until an outcome that reaped it committed', () => {
    const reaped = new ReapedUntil();
    expect(reaped.of('p1', 'resource:r1')).toBe(-Infinity);
    reaped.reaped('p1', ['resource:r1', 'user:u1'], 1_000);
    expect(reaped.of('p1', 'resource:r1')).toBe(1_000);
    expect(reaped.of('p1', 'user:u1')).toBe(1_000);
    // Another project's scope of the same name is another scope.
    expect(reaped.of('p2', 'resource:r1')).toBe(-Infinity);
  });

  it('never moves a bound back (an outcome that took its time earlier commits later)', () => {
    const reaped = new ReapedUntil();
    reaped.reaped('p1', ['resource:r1'], 2_000);
    reaped.reaped('p1', ['resource:r1'], 1_500);
    expect(reaped.of('p1', 'resource:r1')).toBe(2_000);
  });

  it('forgets the scopes reaped longest ago past its size, which then read all their expired holds', () => {
    const reaped = new ReapedUntil(2);
    reaped.reaped('p1', ['resource:a'], 1);
    reaped.reaped('p1', ['resource:b'], 2);
    reaped.reaped('p1', ['resource:a'], 3);
    reaped.reaped('p1', ['resource:c'], 4);
    expect([reaped.of('p1', 'resource:a'), reaped.of('p1', 'resource:b'), reaped.of('p1', 'resource:c')]).toEqual([
      3,
      -Infinity,
      4,
    ]);
  });
});
