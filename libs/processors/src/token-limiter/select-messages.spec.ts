import { selectMessages, type Candidate } from './select-messages';

const msg = (tokens: number, toolCallIds: string[] = [], isProtected = false): Candidate => ({
  tokens,
  toolCallIds,
  protected: isProtected,
});
const kept = (s: ReturnType<typeof selectMessages>) => (s.ok ? s.keep.flatMap((k, i) => (k ? [i] : [])) : s.reason);

describe('selectMessages', () => {
  // Oldest first: 0:10 1:50 2:10 3:30 — budget 50.
  const history = [msg(10), msg(50), msg(10), msg(30)];

  it('best-fit skips a message that does not fit and keeps looking at older ones', () => {
    expect(kept(selectMessages(history, 50, 'best-fit'))).toEqual([0, 2, 3]);
  });

  it('contiguous stops at the first message that does not fit, keeping an unbroken suffix', () => {
    expect(kept(selectMessages(history, 50, 'contiguous'))).toEqual([2, 3]);
  });

  it('keeps or drops a tool call and its result together, even when they are separate messages', () => {
    // 1 and 3 share call "a": together they cost 40, which does not fit beside 4 (15) within 50.
    const split = [msg(5), msg(20, ['a']), msg(5), msg(20, ['a']), msg(15)];
    expect(kept(selectMessages(split, 50, 'best-fit'))).toEqual([0, 2, 4]);
    expect(kept(selectMessages(split, 55, 'best-fit'))).toEqual([1, 3, 4]);
  });

  it('always keeps protected messages and fills the rest of the budget around them', () => {
    const run = [msg(10), msg(10), msg(45, ['t1'], true)];
    expect(kept(selectMessages(run, 60, 'best-fit'))).toEqual([1, 2]);
  });

  it('keeps protected messages in contiguous mode too, past the first message that does not fit', () => {
    // Newest first: 3 fits (10), 2 does not (50): the suffix ends there, but 0 is this run's tool traffic.
    const run = [msg(20, ['t1'], true), msg(5), msg(50), msg(10)];
    expect(kept(selectMessages(run, 40, 'contiguous'))).toEqual([0, 3]);
    expect(kept(selectMessages(run, 40, 'best-fit'))).toEqual([0, 1, 3]);
  });

  it('counts only what it needs: newest first, ruling out by lower bound, stopping once nothing can fit', () => {
    const counted: number[] = [];
    const lazy = (i: number, tokens: number, minTokens = tokens): Candidate => ({
      tokens: () => (counted.push(i), tokens),
      minTokens,
      toolCallIds: [],
      protected: false,
    });
    // Budget 50: 4 (20) and 3 (25) fit and leave 5; the bounds of 2 (30) and 0 (6) rule them out; 1's bound fits but not its count.
    const history = [lazy(0, 9, 6), lazy(1, 7, 4), lazy(2, 40, 30), lazy(3, 25), lazy(4, 20)];
    expect(kept(selectMessages(history, 50, 'best-fit', { floor: 4 }))).toEqual([3, 4]);
    expect(counted).toEqual([4, 3, 1]);
    // Budget 48 leaves 3 after them, less than any message costs: nothing older is looked at.
    counted.length = 0;
    expect(kept(selectMessages(history, 48, 'best-fit', { floor: 4 }))).toEqual([3, 4]);
    expect(counted).toEqual([4, 3]);
  });

  it('reports when protected messages alone exceed the budget', () => {
    expect(selectMessages([msg(10), msg(70, ['t1'], true)], 60, 'best-fit')).toEqual({
      ok: false,
      reason: 'protected-exceeds',
      protectedTokens: 70,
    });
  });

  it('reports when no message fits', () => {
    expect(selectMessages([msg(80), msg(90)], 60, 'best-fit')).toEqual({
      ok: false,
      reason: 'none-fit',
      protectedTokens: 0,
    });
  });
});
