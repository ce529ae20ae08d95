import type { TiktokenBPE } from 'js-tiktoken/lite';

/**
 * An exact BPE token counter over a js-tiktoken rank set, built for counting rather than encoding.
 *
 * It gives the same tokens as js-tiktoken's `Tiktoken#encode(text, [], [])` (special-token text
 * counts as plain text) but costs far less, in start-up and per call:
 * - the rank table is a hash table over the rank file's own text: one pass hashes each base64
 *   token where it sits, so building it decodes, splits and allocates nothing (js-tiktoken
 *   decodes and re-joins all 200,000 tokens into Maps, seconds on a busy machine);
 * - the pre-tokenizer pattern is compiled once, not once per call;
 * - each pre-tokenized piece (a word, a number, a run of punctuation) is counted once and
 *   memoized: prose repeats its words, so almost every piece is a map lookup.
 *
 * Merging follows byte-pair encoding as tiktoken defines it: start from single bytes, repeatedly
 * merge the adjacent pair with the lowest rank (the leftmost on ties) until no pair is a token.
 */
export class BpeCodec {
  private readonly pattern: RegExp;
  /** base64 of a token's bytes → its rank. */
  private readonly ranks: RankTable;
  private readonly pieces = new Map<string, number>();
  private readonly maxPieces: number;

  /** @param maxPieces - Memoized piece counts kept before the memo is cleared. */
  constructor(bpe: TiktokenBPE, maxPieces = 200_000) {
    this.pattern = new RegExp(bpe.pat_str, 'gu');
    this.maxPieces = maxPieces;
    this.ranks = new RankTable(bpe.bpe_ranks);
  }

  /** Exact token count of `text`. */
  count(text: string): number {
    let total = 0;
    const pattern = this.pattern;
    pattern.lastIndex = 0;
    for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
      const piece = match[0];
      let tokens = this.pieces.get(piece);
      if (tokens === undefined) {
        tokens = this.mergePiece(Buffer.from(piece, 'utf8')).length - 1;
        if (this.pieces.size >= this.maxPieces) this.pieces.clear();
        this.pieces.set(piece, tokens);
      }
      total += tokens;
    }
    return total;
  }

  /** The token ranks of `text`, as js-tiktoken's `encode(text, [], [])` returns them. */
  encode(text: string): number[] {
    const out: number[] = [];
    const pattern = this.pattern;
    pattern.lastIndex = 0;
    for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
      const bytes = Buffer.from(match[0], 'utf8');
      const bounds = this.mergePiece(bytes);
      for (let i = 0; i + 1 < bounds.length; i++)
        out.push(this.ranks.get(bytes.toString('base64', bounds[i], bounds[i + 1]))!);
    }
    return out;
  }

  /** The text of `tokens` (invalid UTF-8 at a cut becomes U+FFFD, as js-tiktoken's decoder does). */
  decode(tokens: number[]): string {
    const chunks: Buffer[] = [];
    for (const rank of tokens) {
      const b64 = this.ranks.token(rank);
      if (b64 !== undefined) chunks.push(Buffer.from(b64, 'base64'));
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  /** Token boundaries (byte offsets, first 0, last `bytes.length`) of one pre-tokenized piece. */
  private mergePiece(bytes: Buffer): number[] {
    if (bytes.length === 0) return [0];
    if (this.ranks.has(bytes.toString('base64'))) return [0, bytes.length];
    const bounds = Array.from({ length: bytes.length + 1 }, (_, i) => i);
    while (bounds.length > 2) {
      let best = Infinity;
      let at = -1;
      for (let i = 0; i + 2 < bounds.length; i++) {
        const rank = this.ranks.get(bytes.toString('base64', bounds[i], bounds[i + 2]));
        if (rank !== undefined && rank < best) {
          best = rank;
          at = i;
        }
      }
      if (at < 0) break;
      bounds.splice(at + 1, 1);
    }
    return bounds;
  }
}

/**
 * base64 token → rank, as an open-addressing hash table of offsets into the rank file's text
 * (`"! <first rank> <token> <token> …"` lines, ranks consecutive within a line).
 */
class RankTable {
  private readonly starts: Int32Array;
  private readonly ends: Int32Array;
  private readonly rankOf: Int32Array;
  /** rank → token index, -1 where no token has that rank. */
  private readonly byRank: Int32Array;
  private readonly slots: Int32Array;
  private readonly mask: number;

  constructor(private readonly text: string) {
    // One pass over the text: a token is at least 4 base64 characters and a separator.
    const capacity = Math.ceil(text.length / 5) + 1;
    const starts = new Int32Array(capacity);
    const ends = new Int32Array(capacity);
    const rankOf = new Int32Array(capacity);
    const hashes = new Int32Array(capacity);
    const length = text.length;
    let n = 0;
    let maxRank = -1;
    let i = 0;
    while (i < length) {
      // A line: a readable label (ignored), the first rank, then the tokens in rank order.
      while (i < length && text.charCodeAt(i) !== 0x20 && text.charCodeAt(i) !== 0x0a) i++;
      if (i < length && text.charCodeAt(i) === 0x20) {
        i++;
        let rank = 0;
        for (let c = text.charCodeAt(i); c >= 0x30 && c <= 0x39; c = text.charCodeAt(++i))
          rank = rank * 10 + (c - 0x30);
        while (i < length && text.charCodeAt(i) === 0x20) {
          const start = ++i;
          let h = FNV_OFFSET;
          for (let c = text.charCodeAt(i); i < length && c !== 0x20 && c !== 0x0a; c = text.charCodeAt(++i))
            h = Math.imul(h ^ c, FNV_PRIME);
          if (i > start) {
            starts[n] = start;
            ends[n] = i;
            rankOf[n] = rank;
            hashes[n] = h;
            if (rank > maxRank) maxRank = rank;
            n++;
            rank++;
          }
        }
      }
      i++; // the line break
    }
    this.starts = starts.subarray(0, n);
    this.ends = ends.subarray(0, n);
    this.rankOf = rankOf.subarray(0, n);
    this.byRank = new Int32Array(maxRank + 1).fill(-1);
    let size = 1;
    while (size < n * 2) size <<= 1;
    this.mask = size - 1;
    this.slots = new Int32Array(size).fill(-1);
    for (let t = 0; t < n; t++) {
      this.byRank[this.rankOf[t]!] = t;
      let slot = hashes[t]! & this.mask;
      while (this.slots[slot] !== -1) slot = (slot + 1) & this.mask;
      this.slots[slot] = t;
    }
  }

  /** The rank of the token whose bytes are `base64`, if it is one. */
  get(base64: string): number | undefined {
    let slot = hashString(base64) & this.mask;
    for (let i = this.slots[slot]!; i !== -1; i = this.slots[slot]!) {
      const start = this.starts[i]!;
      if (this.ends[i]! - start === base64.length && this.text.startsWith(base64, start)) return this.rankOf[i];
      slot = (slot + 1) & this.mask;
    }
    return undefined;
  }

  has(base64: string): boolean {
    return this.get(base64) !== undefined;
  }

  /** The base64 bytes of the token of `rank`. */
  token(rank: number): string | undefined {
    const i = rank >= 0 && rank < this.byRank.length ? this.byRank[rank]! : -1;
    return i < 0 ? undefined : this.text.slice(this.starts[i], this.ends[i]);
  }
}

const FNV_OFFSET = 0x811c9dc5 | 0;
const FNV_PRIME = 0x01000193;

/** FNV-1a over UTF-16 code units, as the table's build hashes each token in place. */
function hashString(s: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), FNV_PRIME);
  return h;
}
