import { memoized } from './memoized';

describe('memoized', () => {
  it('computes a key once while it is kept, and again after the cache filled and was dropped', () => {
    const computed: string[] = [];
    const upper = memoized(2, (s: string) => {
      computed.push(s);
      return s.toUpperCase();
    });
    expect([upper('a'), upper('a'), upper('b'), upper('a')]).toEqual(['A', 'A', 'B', 'A']);
    expect(computed).toEqual(['a', 'b']);
    // A third key finds two held: all are dropped, then the third is kept alone.
    expect(upper('c')).toBe('C');
    expect(upper('c')).toBe('C');
    expect(upper('a')).toBe('A');
    expect(computed).toEqual(['a', 'b', 'c', 'a']);
  });
});
