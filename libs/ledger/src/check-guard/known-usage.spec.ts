import { emptyUsage } from './guard-decision';
import { KnownUsage } from './known-usage';

describe('KnownUsage', () => {
  const usage = (inputTokens: number) => new Map([['resource:r1@1h', { ...emptyUsage(), inputTokens }]]);

  it('gives a copy: deciding on it (which holds the step) leaves what is known as it was', () => {
    const known = new KnownUsage();
    known.set('p\u001fresource:r1@1h', usage(100));
    known.get('p\u001fresource:r1@1h')!.get('resource:r1@1h')!.inputTokens += 50;
    expect(known.get('p\u001fresource:r1@1h')!.get('resource:r1@1h')!.inputTokens).toBe(100);
  });

  it("keeps only a shape's own keys, and knows nothing of a shape whose keys the commit did not read", () => {
    const known = new KnownUsage();
    const batch = new Map([...usage(100), ['user:u1@1h', { ...emptyUsage(), inputTokens: 7 }]]);
    known.set('a', batch, ['resource:r1@1h']);
    expect([...known.get('a')!.keys()]).toEqual(['resource:r1@1h']);
    known.set('a', batch, ['resource:r1@1h', 'run:t1']);
    expect(known.get('a')).toBeUndefined();
  });

  it('forgets the shapes committed least recently first, past its bound', () => {
    const known = new KnownUsage(2);
    known.set('a', usage(1));
    known.set('b', usage(2));
    known.set('a', usage(3));
    known.set('c', usage(4));
    expect(['a', 'b', 'c'].map((s) => known.get(s)?.get('resource:r1@1h')?.inputTokens)).toEqual([3, undefined, 4]);
    known.missed('a');
    expect(known.get('a')).toBeUndefined();
  });

  it('after a miss, is not guessed for the next 2, 4, … 64 commits of the shape; a guess that holds clears it', () => {
    const known = new KnownUsage();
    /** How many commits after a miss the shape waits before it is guessed again. */
    const waitAfterMiss = () => {
      known.missed('a');
      let commits = 0;
      while (!known.get('a')) {
        known.set('a', usage(commits));
        commits += 1;
      }
      return commits;
    };
    expect([1, 2, 3, 4, 5, 6, 7, 8].map(waitAfterMiss)).toEqual([2, 4, 8, 16, 32, 64, 64, 64]);
    known.set('a', usage(1), undefined, true);
    expect(waitAfterMiss()).toBe(2);
  });
});
