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
