/** Encoder operations truncation needs; {@link MessageTokenCounter} provides them. */
export interface TokenCodec {
  encode(text: string): number[];
  decode(tokens: number[]): string;
}

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/**
 * The longest prefix of `text` that encodes to at most `maxTokens` tokens and ends on a grapheme
 * boundary, so no emoji, ZWJ sequence, combining mark or surrogate pair is cut in half.
 *
 * Decoding a token prefix can end inside a multi-byte character (the decoder then yields U+FFFD),
 * so the decoded prefix is checked against the original text and walked back until it matches.
 */
export function truncateByTokens(codec: TokenCodec, text: string, maxTokens: number): { text: string; tokens: number } {
  if (maxTokens <= 0 || text.length === 0) return { text: '', tokens: 0 };
  const tokens = codec.encode(text);
  if (tokens.length <= maxTokens) return { text, tokens: tokens.length };

  let n = maxTokens;
  let prefix = '';
  while (n > 0) {
    prefix = codec.decode(tokens.slice(0, n));
    if (text.startsWith(prefix)) break;
    n--;
  }
  if (n === 0) return { text: '', tokens: 0 };
  const cut = lastGraphemeBoundaryAtOrBefore(text, prefix.length);
  const safe = text.slice(0, cut);
  return { text: safe, tokens: safe.length === prefix.length ? n : codec.encode(safe).length };
}

/** Largest grapheme boundary ≤ `index`. Segments only a window around `index`: clusters are short. */
function lastGraphemeBoundaryAtOrBefore(text: string, index: number): number {
  if (index >= text.length) return text.length;
  const start = Math.max(0, index - 64);
  let boundary = start;
  for (const { index: at } of graphemes.segment(text.slice(start, Math.min(text.length, index + 64)))) {
    if (start + at > index) break;
    boundary = start + at;
  }
  return boundary;
}
