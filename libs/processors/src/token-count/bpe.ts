import type { TiktokenBPE } from 'js-tiktoken/lite';

/**
 * An exact BPE token counter over a js-tiktoken rank set, built for counting rather than encoding.
 *
 * It gives the same tokens as js-tiktoken's `Tiktoken#encode(text, [], [])` (special-token text
 * counts as plain text) but costs far less, in start-up and per call:
 * - the rank table is keyed by the rank file's own base64 strings, so building it decodes nothing
 *   (js-tiktoken decodes and re-joins all 200,000 tokens, seconds on a busy machine);
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
  private readonly ranks = new Map<string, number>();
  /** rank → base64 of its bytes; for decoding. */
  private readonly tokens: string[] = [];
  private readonly pieces = new Map<string, number>();
  private readonly maxPieces: number;

  /** @param maxPieces - Memoized piece counts kept before the memo is cleared. */
  constructor(bpe: TiktokenBPE, maxPieces = 200_000) {
    this.pattern = new RegExp(bpe.pat_str, 'gu');
    this.maxPieces = maxPieces;
    for (const line of bpe.bpe_ranks.split('\n')) {
      if (line.length === 0) continue;
      const fields = line.split(' ');
      const offset = Number.parseInt(fields[1]!, 10);
      for (let i = 2; i < fields.length; i++) {
        this.ranks.set(fields[i]!, offset + i - 2);
        this.tokens[offset + i - 2] = fields[i]!;
      }
    }
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
      for (let i = 0; i + 1 < bounds.length; i++) out.push(this.ranks.get(bytes.toString('base64', bounds[i], bounds[i + 1]))!);
    }
    return out;
  }

  /** The text of `tokens` (invalid UTF-8 at a cut becomes U+FFFD, as js-tiktoken's decoder does). */
  decode(tokens: number[]): string {
    const chunks: Buffer[] = [];
    for (const rank of tokens) {
      const b64 = this.tokens[rank];
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
