import type { TiktokenBPE } from 'js-tiktoken/lite';

/**
 * An exact BPE token counter over a tiktoken rank set, built for counting rather than encoding.
 *
 * It gives the same tokens as js-tiktoken's `Tiktoken#encode(text, [], [])` (special-token text
 * counts as plain text) but costs far less, in start-up and per call:
 * - the rank table holds every token's bytes in one buffer, keyed by an open-addressing hash over
 *   those bytes: read as it lies from a file shipped with the package ({@link RankTable.fromBinary}:
 *   nothing to parse or build), or built in one pass from a js-tiktoken rank file for other rank
 *   sets (js-tiktoken decodes and re-joins all 200,000 tokens into Maps, seconds on a busy machine);
 * - a piece is merged on its UTF-8 bytes, looking pairs up without making a string for each;
 * - the pre-tokenizer pattern is compiled once, not once per call;
 * - each pre-tokenized piece (a word, a number, a run of punctuation) is counted once and
 *   memoized: prose repeats its words, so almost every piece is a map lookup.
 *
 * Merging follows byte-pair encoding as tiktoken defines it: start from single bytes, repeatedly
 * merge the adjacent pair with the lowest rank (the leftmost on ties) until no pair is a token.
 */
export class BpeCodec {
  private readonly pattern: RegExp;
  private readonly ranks: RankTable;
  private readonly pieces = new Map<string, number>();
  private readonly maxPieces: number;
  /** UTF-8 bytes of the piece being merged; grown when a piece does not fit. */
  private scratch = Buffer.allocUnsafe(1024);
  /** Per merge: token boundaries, and the rank of the pair starting at each boundary. */
  private bounds = new Int32Array(1025);
  private pairRanks = new Int32Array(1025);

  /**
   * @param ranks - A js-tiktoken rank set (`js-tiktoken/ranks/*`), or a table already loaded.
   * @param maxPieces - Memoized piece counts kept before the memo is cleared.
   */
  constructor(ranks: TiktokenBPE | RankTable, maxPieces = 200_000) {
    this.ranks = ranks instanceof RankTable ? ranks : RankTable.fromTiktoken(ranks);
    this.pattern = new RegExp(this.ranks.pattern, 'gu');
    this.maxPieces = maxPieces;
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
        tokens = this.mergePiece(piece) - 1;
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
      const n = this.mergePiece(match[0]);
      for (let i = 0; i + 1 < n; i++) out.push(this.ranks.get(this.scratch, this.bounds[i]!, this.bounds[i + 1]!));
    }
    return out;
  }

  /** The text of `tokens` (invalid UTF-8 at a cut becomes U+FFFD, as js-tiktoken's decoder does). */
  decode(tokens: number[]): string {
    const chunks: Uint8Array[] = [];
    for (const rank of tokens) {
      const bytes = this.ranks.token(rank);
      if (bytes !== undefined) chunks.push(bytes);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  /**
   * Merges one pre-tokenized piece: its UTF-8 bytes are left in `scratch` and its token
   * boundaries (byte offsets, first 0, last the byte length) in `bounds`. Returns how many
   * boundaries there are: one more than the tokens.
   */
  private mergePiece(piece: string): number {
    if (piece.length * 3 > this.scratch.length) {
      this.scratch = Buffer.allocUnsafe(piece.length * 3);
      this.bounds = new Int32Array(piece.length * 3 + 1);
      this.pairRanks = new Int32Array(piece.length * 3 + 1);
    }
    const bytes = this.scratch;
    const length = bytes.write(piece, 0, 'utf8');
    const bounds = this.bounds;
    const ranks = this.ranks;
    bounds[0] = 0;
    if (length === 0) return 1;
    if (ranks.get(bytes, 0, length) >= 0) {
      bounds[1] = length;
      return 2;
    }
    // pairRanks[i]: rank of the bytes from bounds[i] to bounds[i + 2], or NONE.
    const pairRanks = this.pairRanks;
    let n = length + 1;
    for (let i = 0; i < n; i++) bounds[i] = i;
    for (let i = 0; i + 2 < n; i++) {
      const rank = ranks.get(bytes, i, i + 2);
      pairRanks[i] = rank < 0 ? NONE : rank;
    }
    while (n > 2) {
      let best = NONE;
      let at = -1;
      for (let i = 0; i + 2 < n; i++) {
        if (pairRanks[i]! < best) {
          best = pairRanks[i]!;
          at = i;
        }
      }
      if (at < 0) break;
      // Boundary at + 1 goes: the pair at `at` becomes one token.
      bounds.copyWithin(at + 1, at + 2, n);
      pairRanks.copyWithin(at + 1, at + 2, n);
      n--;
      if (at + 2 < n) {
        const rank = ranks.get(bytes, bounds[at]!, bounds[at + 2]!);
        pairRanks[at] = rank < 0 ? NONE : rank;
      } else pairRanks[at] = NONE;
      if (at > 0) {
        const rank = ranks.get(bytes, bounds[at - 1]!, bounds[at + 1]!);
        pairRanks[at - 1] = rank < 0 ? NONE : rank;
      }
    }
    return n;
  }
}

const NONE = 0x7fffffff;

/** The first bytes of a rank table file: "TGBPE", format version 1, two zero bytes. */
const MAGIC = Buffer.from([0x54, 0x47, 0x42, 0x50, 0x45, 0x01, 0x00, 0x00]);
/** A hash slot holding no token. */
const EMPTY = -1;

/**
 * A tiktoken rank set as BPE needs it: token bytes → rank, rank → token bytes, and the
 * pre-tokenizer pattern.
 *
 * Every token's bytes lie in one buffer in rank order; an open-addressing hash table (FNV-1a over
 * the bytes, linear probing, at most 40% full) maps bytes to ranks. Each slot holds the rank in its
 * low bits and more bits of the hash above them, so a probe rules out almost every other token
 * without reading its bytes.
 *
 * The file form (`*.bpe`, written by `libs/processors/scripts/write-ranks.mjs` with
 * {@link RankTable.toBinary}) is the table itself, so loading it builds nothing: little-endian,
 * `"TGBPE" 01 00 00`, u32 pattern byte length, the pattern (UTF-8), zero padding to a multiple of
 * 4, u32 rank count R, u32 slot count S, i32 offsets[R + 1] (rank r's bytes are
 * offsets[r]…offsets[r + 1]), i32 slots[S], then the tokens' bytes.
 */
export class RankTable {
  private readonly mask: number;
  private readonly rankBits: number;
  private readonly rankMask: number;

  private constructor(
    /** The pre-tokenizer pattern (a `u`-flag regular expression source). */
    readonly pattern: string,
    private readonly bytes: Uint8Array,
    /** Where each rank's bytes start in `bytes`; rank r spans offsets[r]…offsets[r + 1]. */
    private readonly offsets: Int32Array,
    private readonly slots: Int32Array,
  ) {
    this.mask = slots.length - 1;
    this.rankBits = rankBitsFor(offsets.length - 1);
    this.rankMask = 2 ** this.rankBits - 1;
  }

  /** The table of these tokens: `bytes` in rank order, `offsets` as in the class comment. */
  private static build(pattern: string, bytes: Uint8Array, offsets: Int32Array): RankTable {
    const ranks = offsets.length - 1;
    const rankBits = rankBitsFor(ranks);
    let size = 1;
    while (size < ranks * 2.5) size <<= 1;
    const slots = new Int32Array(size).fill(EMPTY);
    const mask = size - 1;
    for (let r = 0; r < ranks; r++) {
      const start = offsets[r]!;
      const end = offsets[r + 1]!;
      if (end === start) continue;
      const h = hashBytes(bytes, start, end);
      let slot = h & mask;
      while (slots[slot] !== EMPTY) slot = (slot + 1) & mask;
      slots[slot] = tagOf(h, rankBits) | r;
    }
    return new RankTable(pattern, bytes, offsets, slots);
  }

  /** Reads a rank table file (see the class comment), using its bytes in place. */
  static fromBinary(file: Uint8Array): RankTable {
    if (file.byteLength < 24 || !MAGIC.equals(file.subarray(0, MAGIC.length)))
      throw new Error('Not a BPE rank table file (bad magic or version)');
    // Int32Array views need an aligned buffer, and the file is little-endian.
    if (file.byteOffset % 4 !== 0 || !LITTLE_ENDIAN) file = new Uint8Array(file);
    const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
    let at = MAGIC.length;
    const patternLength = view.getUint32(at, true);
    at += 4;
    const pattern = Buffer.from(file.buffer, file.byteOffset + at, patternLength).toString('utf8');
    at = align4(at + patternLength);
    const ranks = view.getUint32(at, true);
    const size = view.getUint32(at + 4, true);
    at += 8;
    const ints = (count: number) => {
      const words = LITTLE_ENDIAN
        ? new Int32Array(file.buffer, file.byteOffset + at, count)
        : Int32Array.from({ length: count }, (_, i) => view.getInt32(at + 4 * i, true));
      at += 4 * count;
      return words;
    };
    const offsets = ints(ranks + 1);
    const slots = ints(size);
    const bytes = file.subarray(at);
    if (offsets[ranks] !== bytes.length || size === 0 || (size & (size - 1)) !== 0)
      throw new Error('BPE rank table file is truncated or corrupt');
    return new RankTable(pattern, bytes, offsets, slots);
  }

  /**
   * Builds the table from a js-tiktoken rank set: its `bpe_ranks` text is lines of
   * `"<label> <first rank> <token> <token> …"`, each token base64, ranks consecutive within a line.
   */
  static fromTiktoken(bpe: TiktokenBPE): RankTable {
    const text = bpe.bpe_ranks;
    const length = text.length;
    // Base64 is 4 characters for 3 bytes; separators and labels only make this an overestimate.
    const bytes = new Uint8Array(Math.ceil((length * 3) / 4));
    const starts: number[] = [];
    const rankOfToken: number[] = [];
    const ends: number[] = [];
    let written = 0;
    let maxRank = -1;
    let i = 0;
    while (i < length) {
      while (i < length && text.charCodeAt(i) !== 0x20 && text.charCodeAt(i) !== 0x0a) i++;
      if (i < length && text.charCodeAt(i) === 0x20) {
        i++;
        let rank = 0;
        for (let c = text.charCodeAt(i); c >= 0x30 && c <= 0x39; c = text.charCodeAt(++i))
          rank = rank * 10 + (c - 0x30);
        while (i < length && text.charCodeAt(i) === 0x20) {
          const start = ++i;
          let bits = 0;
          let held = 0;
          const from = written;
          for (let c = text.charCodeAt(i); i < length && c !== 0x20 && c !== 0x0a; c = text.charCodeAt(++i)) {
            const v = c < 128 ? BASE64[c]! : -1;
            if (v < 0) continue; // '=' padding
            bits = ((bits << 6) | v) & 0xffffff;
            held += 6;
            if (held >= 8) {
              held -= 8;
              bytes[written++] = (bits >> held) & 0xff;
            }
          }
          if (i > start) {
            starts.push(from);
            ends.push(written);
            rankOfToken.push(rank);
            if (rank > maxRank) maxRank = rank;
            rank++;
          }
        }
      }
      i++; // the line break
    }
    // Laid out in rank order, as the file is.
    const byRank = new Int32Array(maxRank + 1).fill(-1);
    for (let t = 0; t < starts.length; t++) byRank[rankOfToken[t]!] = t;
    const offsets = new Int32Array(maxRank + 2);
    const ordered = new Uint8Array(written);
    let at = 0;
    for (let r = 0; r <= maxRank; r++) {
      const t = byRank[r]!;
      if (t >= 0) {
        ordered.set(bytes.subarray(starts[t], ends[t]), at);
        at += ends[t]! - starts[t]!;
      }
      offsets[r + 1] = at;
    }
    return RankTable.build(bpe.pat_str, ordered, offsets);
  }

  /** The file form of this table, which {@link RankTable.fromBinary} reads. */
  toBinary(): Buffer {
    const pattern = Buffer.from(this.pattern, 'utf8');
    const header = Buffer.alloc(align4(MAGIC.length + 4 + pattern.length) + 8);
    MAGIC.copy(header, 0);
    header.writeUInt32LE(pattern.length, MAGIC.length);
    pattern.copy(header, MAGIC.length + 4);
    header.writeUInt32LE(this.offsets.length - 1, header.length - 8);
    header.writeUInt32LE(this.slots.length, header.length - 4);
    const le = (words: Int32Array) => {
      const out = Buffer.alloc(words.length * 4);
      for (let i = 0; i < words.length; i++) out.writeInt32LE(words[i]!, i * 4);
      return out;
    };
    return Buffer.concat([header, le(this.offsets), le(this.slots), this.bytes]);
  }

  /** The rank of the token whose bytes are `source[start…end)`, or -1 if they are not a token. */
  get(source: Uint8Array, start: number, end: number): number {
    const length = end - start;
    const bytes = this.bytes;
    const offsets = this.offsets;
    const slots = this.slots;
    const mask = this.mask;
    const rankMask = this.rankMask;
    const h = hashBytes(source, start, end);
    const tag = tagOf(h, this.rankBits);
    let slot = h & mask;
    for (let entry = slots[slot]!; entry !== EMPTY; entry = slots[slot]!) {
      if ((entry & ~rankMask) === tag) {
        const rank = entry & rankMask;
        const at = offsets[rank]!;
        if (offsets[rank + 1]! - at === length) {
          let i = 0;
          while (i < length && bytes[at + i] === source[start + i]) i++;
          if (i === length) return rank;
        }
      }
      slot = (slot + 1) & mask;
    }
    return -1;
  }

  /** The bytes of the token of `rank` (a view, not a copy). */
  token(rank: number): Uint8Array | undefined {
    if (!(rank >= 0 && rank + 1 < this.offsets.length)) return undefined;
    const start = this.offsets[rank]!;
    const end = this.offsets[rank + 1]!;
    return end > start ? this.bytes.subarray(start, end) : undefined;
  }

  /** Highest rank + 1. */
  get size(): number {
    return this.offsets.length - 1;
  }
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Bits a rank takes in a slot (the rest, up to 31, hold hash bits). */
function rankBitsFor(ranks: number): number {
  const bits = Math.max(1, Math.ceil(Math.log2(ranks + 1)));
  if (bits > 28) throw new RangeError(`BPE rank table: ${ranks} ranks are more than a slot holds`);
  return bits;
}

/** The hash bits kept in a slot above its rank: the hash's top bits, which the slot index does not use. */
function tagOf(hash: number, rankBits: number): number {
  return ((hash >>> (32 - (31 - rankBits))) << rankBits) | 0;
}

function align4(n: number): number {
  return (n + 3) & ~3;
}

const BASE64 = (() => {
  const table = new Int8Array(128).fill(-1);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  for (let i = 0; i < alphabet.length; i++) table[alphabet.charCodeAt(i)] = i;
  return table;
})();

const FNV_OFFSET = 0x811c9dc5 | 0;
const FNV_PRIME = 0x01000193;

/** FNV-1a over `bytes[start…end)`. */
function hashBytes(bytes: Uint8Array, start: number, end: number): number {
  let h = FNV_OFFSET;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i]!, FNV_PRIME);
  return h;
}
