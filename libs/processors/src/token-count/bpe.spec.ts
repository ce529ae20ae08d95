import { getEncoding, type TiktokenBPE } from 'js-tiktoken';
import { BpeCodec } from './bpe';
import { minTextTokens } from './message-token-counter';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const o200kRanks = require('js-tiktoken/ranks/o200k_base') as TiktokenBPE;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const cl100kRanks = require('js-tiktoken/ranks/cl100k_base') as TiktokenBPE;

/** Text that exercises every branch of the pre-tokenizer and of the merge loop. */
const SAMPLES = [
  '',
  'hello',
  'The quick brown fox jumps over the lazy dog, naïvely — 42 times! 🦊',
  "I'm sure they'll say it's fine; we've DONE it, HASN'T he?",
  'Straße, 東京都渋谷区, Ελληνικά, русский, العربية, हिन्दी, 한국어',
  'family 👨‍👩‍👧‍👦, flags 🇫🇷🇩🇪, skin 👍🏽, keycap 1️⃣, combining e\u0301',
  '1234567890 3.14159 1,250.00 EUR FR76 3000 6000 0112 3456 7890 189',
  '   leading spaces, trailing spaces   \n\n\ttabs\r\n\r\nand\u00a0nbsp\u2003em  ',
  '<|endoftext|> <|fim_prefix|> special tokens as plain text',
  'function f(x) { return x?.y ?? [1, 2, 3].map((n) => n ** 2); } // code',
  '{"hits":[{"title":"a","snippet":"b c d"}],"limit":5,"nested":{"k":null,"t":true}}',
  'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
  'x'.repeat(300) + ' ' + '🦊'.repeat(40) + ' ' + 'é'.repeat(77),
  'lone surrogate \ud83d here and \udc00 there',
];

describe('BpeCodec', () => {
  it.each([
    ['o200k_base', o200kRanks],
    ['cl100k_base', cl100kRanks],
  ] as const)('counts and encodes exactly as js-tiktoken does (%s)', (name, ranks) => {
    const reference = getEncoding(name);
    const codec = new BpeCodec(ranks);
    for (const text of SAMPLES) {
      const expected = reference.encode(text, [], []);
      expect(codec.encode(text)).toEqual(expected);
      expect(codec.count(text)).toBe(expected.length);
      expect(codec.count(text)).toBe(expected.length); // memoized pieces give the same count
      expect(codec.decode(expected)).toBe(reference.decode(expected));
    }
  });

  it('stays exact after its piece memo is cleared', () => {
    const reference = getEncoding('o200k_base');
    const codec = new BpeCodec(o200kRanks, 8);
    for (const text of SAMPLES) expect(codec.count(text)).toBe(reference.encode(text, [], []).length);
  });

  it('minTextTokens never exceeds the exact count (the bound the limiter rules messages out by)', () => {
    const o200k = new BpeCodec(o200kRanks);
    const cl100k = new BpeCodec(cl100kRanks);
    const tricky = ['!\n/path/to', '?\r\n//x', 'a\n \nb', '\n/', 'x \u3000 y\u00a0z', ...SAMPLES];
    for (const text of tricky) {
      expect(minTextTokens(text)).toBeLessThanOrEqual(o200k.count(text));
      expect(minTextTokens(text)).toBeLessThanOrEqual(cl100k.count(text));
    }
    expect(minTextTokens(' one two  three\tfour\n')).toBe(4);
  });
});
