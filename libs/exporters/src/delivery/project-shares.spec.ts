import { ProjectShares } from './project-shares';

describe('ProjectShares', () => {
  it('gives a project half the slots, lets it borrow idle ones, and always keeps one for another project', () => {
    const shares = new ProjectShares(4);
    const a = [shares.tryEnter('a'), shares.tryEnter('a'), shares.tryEnter('a')];
    expect(a.every(Boolean)).toBe(true);
    // A 4th would take the last free slot.
    expect(shares.tryEnter('a')).toBeNull();
    const b = shares.tryEnter('b');
    expect(b).not.toBeNull();
    // Every slot is taken; when A's borrowed one comes back, A is at its share and another project is running.
    a[2]!();
    expect(shares.tryEnter('a')).toBeNull();
    expect(shares.tryEnter('c')).not.toBeNull();
    expect(shares.runningFor('a')).toBe(2);
  });

  it('counts a release once', () => {
    const shares = new ProjectShares(2);
    const release = shares.tryEnter('a')!;
    expect(shares.tryEnter('a')).toBeNull();
    release();
    release();
    expect(shares.runningFor('a')).toBe(0);
    expect(shares.tryEnter('a')).not.toBeNull();
    expect(shares.tryEnter('b')).not.toBeNull();
  });

  it('with one slot, never lets a project borrow', () => {
    const shares = new ProjectShares(1);
    expect(shares.share).toBe(1);
    expect(shares.tryEnter('a')).not.toBeNull();
    expect(shares.tryEnter('a')).toBeNull();
  });
});
