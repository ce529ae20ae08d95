import { issueKey, parseKey, secretMatches, tokensMatch } from './api-key';

describe('API keys', () => {
  it('issues a key whose secret matches its stored hash, and only that one', () => {
    const a = issueKey();
    const b = issueKey();
    const pa = parseKey(a.key)!;
    expect(pa.id).toBe(a.id);
    expect(secretMatches(pa.secret, a.secretHash)).toBe(true);
    expect(secretMatches(parseKey(b.key)!.secret, a.secretHash)).toBe(false);
    expect(a.secretHash).not.toContain(pa.secret);
  });

  it('refuses keys that do not have the shape of ours', () => {
    expect(parseKey('Bearer x')).toBeNull();
    expect(parseKey(issueKey().key + 'x')).toBeNull();
  });

  it('compares admin tokens of any length', () => {
    expect(tokensMatch('abc', 'abc')).toBe(true);
    expect(tokensMatch('abc', 'abcd')).toBe(false);
  });
});

describe('secret comparison', () => {
  it('is constant-time: always two 32-byte SHA-256 digests through timingSafeEqual, whatever was presented', () => {
    const crypto = jest.requireActual<typeof import('node:crypto')>('node:crypto');
    const calls: [number, number][] = [];
    jest.isolateModules(() => {
      jest.doMock('node:crypto', () => ({
        ...crypto,
        timingSafeEqual: (x: Buffer, y: Buffer) => (calls.push([x.length, y.length]), crypto.timingSafeEqual(x, y)),
      }));
      const { hashSecret: hash, secretMatches: matches } = require('./api-key') as typeof import('./api-key');
      const stored = hash('s'.repeat(43));
      const results = ['s'.repeat(43), 't'.repeat(43), 's', '', 'x'.repeat(10_000)].map((presented) =>
        matches(presented, stored),
      );
      expect(results).toEqual([true, false, false, false, false]);
    });
    expect(calls).toEqual(Array.from({ length: 5 }, () => [32, 32]));
  });
});
