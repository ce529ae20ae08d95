import { MessageTokenCounter } from '../token-count/message-token-counter';
import { truncateByTokens } from './truncate-by-tokens';

const codec = new MessageTokenCounter();
const hasLoneSurrogate = (s: string) =>
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

describe('truncateByTokens', () => {
  it('returns the text unchanged when it fits', () => {
    expect(truncateByTokens(codec, 'short text', 10)).toEqual({
      text: 'short text',
      tokens: codec.countText('short text'),
    });
  });

  it('keeps exactly the first N tokens of plain text', () => {
    const text = 'one two three four five six seven eight nine ten';
    const expected = codec.decode(codec.encode(text).slice(0, 4));
    expect(truncateByTokens(codec, text, 4)).toEqual({ text: expected, tokens: 4 });
    expect(expected).toBe('one two three four');
  });

  it('never cuts inside an emoji, a ZWJ family, a flag or a surrogate pair', () => {
    const text = 'ok 👨‍👩‍👧‍👦🇫🇷😀😀😀 fin';
    const graphemes = [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(text)].map(
      (s) => s.segment,
    );
    const total = codec.countText(text);
    for (let n = 1; n < total; n++) {
      const { text: cut, tokens } = truncateByTokens(codec, text, n);
      expect(tokens).toBeLessThanOrEqual(n);
      expect(codec.countText(cut)).toBe(tokens);
      expect(cut).not.toContain('\uFFFD');
      expect(hasLoneSurrogate(cut)).toBe(false);
      // The cut lands on a grapheme boundary: it is a concatenation of whole graphemes.
      let joined = '';
      for (const g of graphemes) {
        if (joined.length >= cut.length) break;
        joined += g;
      }
      expect(joined).toBe(cut);
    }
  });

  it('returns an empty string when not even one character fits', () => {
    expect(truncateByTokens(codec, '👨‍👩‍👧‍👦', 1)).toEqual({ text: '', tokens: 0 });
    expect(truncateByTokens(codec, 'anything', 0)).toEqual({ text: '', tokens: 0 });
  });
});
