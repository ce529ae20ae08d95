import { getEncoding, type TiktokenBPE } from 'js-tiktoken';
import { readFileSync } from 'node:fs';
import { BpeCodec, RankTable } from './bpe';
import { minTextTokens } from './min-text-tokens';
import { O200K_TABLE_FILE, o200kRanks } from './o200k';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const o200kTiktoken = require('js-tiktoken/ranks/o200k_base') as TiktokenBPE;
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
    ['o200k_base', 'the shipped table', () => o200kRanks()],
    ['o200k_base', "js-tiktoken's rank file", () => o200kTiktoken],
    ['cl100k_base', "js-tiktoken's rank file", () => cl100kRanks],
  ] as const)('counts and encodes exactly as js-tiktoken does (%s, from %s)', (name, _from, ranks) => {
    const reference = getEncoding(name);
    const codec = new BpeCodec(ranks());
    for (const text of SAMPLES) {
      const expected = reference.encode(text, [], []);
      expect(codec.encode(text)).toEqual(expected);
      expect(codec.count(text)).toBe(expected.length);
      expect(codec.count(text)).toBe(expected.length); // memoized pieces give the same count
      expect(codec.decode(expected)).toBe(reference.decode(expected));
    }
  });

  it('counts long pieces (past the merge buffers) and random text exactly', () => {
    const reference = getEncoding('o200k_base');
    const codec = new BpeCodec(o200kRanks());
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    const alphabet = 'ab cdé\n東京🦊.,-_0123456789XYZ\'"{}';
    const texts = ['z'.repeat(5_000), '🦊'.repeat(900), 'ab'.repeat(1_500)];
    for (let i = 0; i < 300; i++)
      texts.push(
        Array.from(
          { length: 1 + Math.floor(random() * 200) },
          () => alphabet[Math.floor(random() * alphabet.length)],
        ).join(''),
      );
    for (const text of texts) {
      const expected = reference.encode(text, [], []);
      expect(codec.count(text)).toBe(expected.length);
      expect(codec.encode(text)).toEqual(expected);
    }
  });

  it('stays exact after its piece memo is cleared', () => {
    const reference = getEncoding('o200k_base');
    const codec = new BpeCodec(o200kRanks(), 8);
    for (const text of SAMPLES) expect(codec.count(text)).toBe(reference.encode(text, [], []).length);
  });

  it('minTextTokens never exceeds the exact count (the bound the limiter rules messages out by)', () => {
    const o200k = new BpeCodec(o200kRanks());
    const cl100k = new BpeCodec(cl100kRanks);
    const tricky = ['!\n/path/to', '?\r\n//x', 'a\n \nb', '\n/', 'x \u3000 y\u00a0z', ...SAMPLES];
    for (const text of tricky) {
      expect(minTextTokens(text)).toBeLessThanOrEqual(o200k.count(text));
      expect(minTextTokens(text)).toBeLessThanOrEqual(cl100k.count(text));
    }
    expect(minTextTokens(' one two  three\tfour\n')).toBe(4);
  });
});

describe('the shipped o200k_base table', () => {
  it("holds exactly js-tiktoken's o200k_base ranks and pattern (else: node libs/processors/scripts/write-ranks.mjs)", () => {
    const shipped = RankTable.fromBinary(readFileSync(O200K_TABLE_FILE));
    const rebuilt = RankTable.fromTiktoken(o200kTiktoken);
    expect(shipped.pattern).toBe(o200kTiktoken.pat_str);
    expect(shipped.size).toBe(rebuilt.size);
    for (let rank = 0; rank < rebuilt.size; rank++) {
      const bytes = rebuilt.token(rank);
      if (!Buffer.from(shipped.token(rank) ?? []).equals(Buffer.from(bytes ?? [])))
        throw new Error(`rank ${rank} differs from js-tiktoken's`);
      if (bytes && shipped.get(bytes, 0, bytes.length) !== rank)
        throw new Error(`rank ${rank} is not found by its bytes`);
    }
  });

  it('is what the default counter loads', () => {
    o200kRanks();
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    expect((require('./o200k') as typeof import('./o200k')).o200kSource).toBe('file');
  });

  it('refuses a file that is not a rank table', () => {
    expect(() => RankTable.fromBinary(Buffer.from('not a table at all'))).toThrow(/Not a BPE rank table/);
  });
});
