import { addressBucket, LocalFailureCounts } from './failure-counts';

describe('LocalFailureCounts (the throttle when Redis cannot be asked)', () => {
  const bucket = (key: string, burst: number, windowMs: number) => ({ key, burst, intervalMs: windowMs / burst });

  it('allows `burst` failures at once, then one more every window/burst', () => {
    const counts = new LocalFailureCounts();
    const b = [bucket('a', 3, 3000)];
    expect([0, 1, 2, 3].map(() => counts.attempt(b, 10_000, true))).toEqual([0, 0, 0, 1000]);
    expect(counts.attempt(b, 10_999, true)).toBe(1);
    expect(counts.attempt(b, 11_000, true)).toBe(0);
    expect(counts.attempt(b, 11_000, true)).toBe(1000);
  });

  it('counts a refused failure nowhere: a throttled client waits exactly the interval, never longer', () => {
    const counts = new LocalFailureCounts();
    const b = [bucket('a', 2, 2000)];
    counts.attempt(b, 0, true);
    counts.attempt(b, 0, true);
    for (let i = 0; i < 100; i++) expect(counts.attempt(b, 500, true)).toBe(500);
    expect(counts.attempt(b, 1000, true)).toBe(0);
  });

  it('refuses when any bucket is spent, and then counts in none', () => {
    const counts = new LocalFailureCounts();
    const address = bucket('addr', 30, 60_000);
    const key = bucket('key', 2, 60_000);
    expect(counts.attempt([address, key], 0, true)).toBe(0);
    expect(counts.attempt([address, key], 0, true)).toBe(0);
    expect(counts.attempt([address, key], 0, true)).toBe(30_000);
    // The address has 2 failures, not 3: 28 more fit.
    expect(Array.from({ length: 29 }, () => counts.attempt([address], 0, true)).filter((w) => w === 0)).toHaveLength(
      28,
    );
  });

  it('peeks without counting', () => {
    const counts = new LocalFailureCounts();
    const b = [bucket('a', 1, 1000)];
    expect(counts.attempt(b, 0, false)).toBe(0);
    expect(counts.attempt(b, 0, false)).toBe(0);
    expect(counts.attempt(b, 0, true)).toBe(0);
    expect(counts.attempt(b, 0, false)).toBe(1000);
  });

  it('stays bounded under a flood of new keys, forgetting spent-out buckets first', () => {
    const counts = new LocalFailureCounts(100);
    for (let i = 0; i < 1000; i++) counts.attempt([bucket(`k${i}`, 5, 1000)], i, true);
    expect(counts.size).toBeLessThanOrEqual(101);
    // The most recent keys are still counted.
    counts.attempt([bucket('k999', 5, 1000)], 999, true);
    expect(counts.attempt([bucket('k999', 1, 1000)], 999, false)).toBeGreaterThan(0);
  });
});

describe('addressBucket', () => {
  it('counts IPv4 (also mapped into IPv6) per address and IPv6 per /64', () => {
    expect(addressBucket('203.0.113.7')).toBe('203.0.113.7');
    expect(addressBucket('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressBucket('2001:db8:abcd:12:1:2:3:4')).toBe('2001:db8:abcd:12::/64');
    expect(addressBucket('2001:db8:abcd:12::99')).toBe('2001:db8:abcd:12::/64');
    expect(addressBucket('2001:0db8:abcd:0012:ffff::1')).toBe('2001:db8:abcd:12::/64');
    expect(addressBucket('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressBucket('::1')).toBe('0:0:0:0::/64');
    expect(addressBucket('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  });
});
