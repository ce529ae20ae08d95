import { findUnstorableText, isAcceptedInstant, isoInstantSchema, unstorableTextReason } from './validation';

describe('findUnstorableText', () => {
  it('names the first string or key holding NUL or a lone surrogate, by its whole path', () => {
    expect(findUnstorableText({ filters: { traceIds: ['ok', 'a\u0000b'] } })).toEqual({
      field: 'filters.traceIds[1]',
      reason: 'must not contain NUL (U+0000)',
    });
    expect(findUnstorableText({ labels: { 'k\ud800': 'v' } })).toEqual({
      field: 'labels.k\ud800',
      reason: 'must not contain a lone surrogate (U+D800) in its name',
    });
    expect(findUnstorableText('x\udfff', 'name')).toEqual({
      field: 'name',
      reason: 'must not contain a lone surrogate (U+DFFF)',
    });
    expect(findUnstorableText({ a: '\u0000', b: '\u0000' })?.field).toBe('a');
  });

  it('accepts paired surrogates, other control characters and non-strings', () => {
    expect(
      findUnstorableText({ emoji: '😀 \ud83d\ude00', bell: '\u0007', n: 1, b: true, z: null, list: [{}] }),
    ).toBeNull();
    expect(unstorableTextReason('\ud83d')).toBe('must not contain a lone surrogate (U+D83D)');
    expect(unstorableTextReason('\ude00x')).toBe('must not contain a lone surrogate (U+DE00)');
  });

  it('walks objects without a prototype (query strings)', () => {
    const query = Object.assign(Object.create(null) as Record<string, string>, { scopeKey: 'resource:\u0000' });
    expect(findUnstorableText(query)?.field).toBe('scopeKey');
  });
});

describe('isoInstantSchema', () => {
  it.each(['2000-01-01T00:00:00Z', '2026-06-01T12:00:00.123+02:00', '9999-12-30T23:59:59.999Z'])('accepts %s', (s) => {
    expect(isoInstantSchema.safeParse(s).success).toBe(true);
  });

  it.each([
    '1999-12-31T23:59:59.999Z',
    '9999-12-31T00:00:00Z',
    '0000-01-01T00:00:00Z',
    '+275760-09-13T00:00:00Z',
    '-000001-01-01T00:00:00Z',
    '2026-02-30T00:00:00Z',
    '2026-01-01',
    '2026-01-01T00:00:00',
    '',
  ])('refuses %s', (s) => {
    expect(isoInstantSchema.safeParse(s).success).toBe(false);
  });

  it('bounds instants to what PostgreSQL and Date#toISOString both write', () => {
    expect([8.64e15, -8.64e15, NaN, Date.UTC(1999, 11, 31)].map(isAcceptedInstant)).toEqual([
      false,
      false,
      false,
      false,
    ]);
  });
});
