/**
 * A lower bound of the BPE tokens of `text`: its words (runs of non-whitespace characters), where
 * a run that starts with `/` right after a line break is not counted as a new word.
 *
 * Why it holds: the tiktoken pre-tokenizers (o200k_base, cl100k_base, p50k, r50k) cut text into
 * pieces that each give at least one token, and a piece never holds whitespace between two
 * non-whitespace characters, except o200k's punctuation piece, which may run on over line breaks
 * into slashes (`[\r\n/]*`). So each counted word starts its own piece. Whitespace is JavaScript's
 * `\s`, as in the pattern.
 */
export function minTextTokens(text: string): number {
  let words = 0;
  let inWord = false;
  let previous = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (isWhitespace(c)) {
      inWord = false;
    } else {
      if (!inWord && !(c === 0x2f && (previous === 0x0a || previous === 0x0d))) words++;
      inWord = true;
    }
    previous = c;
  }
  return words;
}

/** JavaScript's `\s`: WhiteSpace and LineTerminator code points. */
function isWhitespace(c: number): boolean {
  if (c < 0x80) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}
