import { emptyUsage } from '../../budgets/guard-decision';
import { KnownUsage } from './known-usage';

describe('KnownUsage', () => {
  const R1 = 'resource:r1@1h';
  const usage = (inputTokens: number) => new Map([[R1, { ...emptyUsage(), inputTokens }]]);
  const tokens = (known: KnownUsage, projectId = 'p', key = R1) => known.guess(projectId, [key])?.get(key)?.inputTokens;

  it('guesses a key it never committed on as empty: a new run, thread or session holds nothing yet', () => {
    const known = new KnownUsage();
    expect(known.guess('p', ['run:t1', R1])).toEqual(
      new Map([
        ['run:t1', emptyUsage()],
        [R1, emptyUsage()],
      ]),
    );
  });

  it('gives a copy: deciding on it (which holds the step) leaves what is known as it was', () => {
    const known = new KnownUsage();
    known.set('p', usage(100), [R1]);
    known.guess('p', [R1])!.get(R1)!.inputTokens += 50;
    expect(tokens(known)).toBe(100);
  });

  it("keeps each project's keys apart, and only the keys the commit names", () => {
    const known = new KnownUsage();
    known.set('p', new Map([...usage(100), ['user:u1@1h', { ...emptyUsage(), inputTokens: 7 }]]), [R1]);
    expect(tokens(known)).toBe(100);
    expect(tokens(known, 'p', 'user:u1@1h')).toBe(0);
    expect(tokens(known, 'q')).toBe(0);
  });

  it('forgets the keys committed least recently first, past its bound (they are guessed empty again)', () => {
    const known = new KnownUsage(2);
    known.set('a', usage(1), [R1]);
    known.set('b', usage(2), [R1]);
    known.set('a', usage(3), [R1]);
    known.set('c', usage(4), [R1]);
    expect(['a', 'b', 'c'].map((p) => tokens(known, p))).toEqual([3, 0, 4]);
  });

  it('a key guessed empty that missed is guessed again at once, with what the next commit left', () => {
    const known = new KnownUsage();
    known.missed('p', [R1]);
    expect(tokens(known)).toBe(0);
    known.set('p', usage(900), [R1]);
    expect(tokens(known)).toBe(900);
  });

  it('after a miss, a known key is not guessed for its next 2, 4, … 64 commits, nor a batch naming it; a guess that holds clears it', () => {
    const known = new KnownUsage();
    /** How many commits after a miss the key waits before it is guessed again. */
    const waitAfterMiss = () => {
      known.set('p', usage(1), [R1]);
      known.missed('p', [R1]);
      let commits = 0;
      while (!known.guess('p', [R1])) {
        expect(known.guess('p', ['run:t1', R1])).toBeUndefined();
        known.set('p', usage(commits), [R1]);
        commits += 1;
      }
      return commits;
    };
    expect([1, 2, 3, 4, 5, 6, 7, 8].map(waitAfterMiss)).toEqual([2, 4, 8, 16, 32, 64, 64, 64]);
    known.set('p', usage(1), [R1], true);
    expect(waitAfterMiss()).toBe(2);
  });
});
