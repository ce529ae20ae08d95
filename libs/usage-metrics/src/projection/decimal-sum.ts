/**
 * Exact decimal sums of JS numbers, so that a rollup's `sum` does not depend on how events were
 * split into batches (float addition is not associative: a replay would differ in the last digits).
 * Each number counts as its shortest round-trip decimal (what `String(x)` prints, and what
 * PostgreSQL prints for float8), held as an integer scaled by 10^scale.
 */
export class DecimalSum {
  /** Integers (token counts) are summed as a plain number while it stays exact: the common, fast case. */
  private whole = 0;
  private int = 0n;
  private scale = 0;

  add(x: number): this {
    if (Number.isInteger(x)) {
      const next = this.whole + x;
      if (Number.isSafeInteger(next)) {
        this.whole = next;
        return this;
      }
    }
    this.addExact(x);
    return this;
  }

  private addExact(x: number): void {
    const [digits, scale] = parse(x);
    if (scale > this.scale) {
      this.int *= 10n ** BigInt(scale - this.scale);
      this.scale = scale;
    }
    this.int += digits * 10n ** BigInt(this.scale - scale);
  }

  toString(): string {
    const total = this.int + BigInt(this.whole) * 10n ** BigInt(this.scale);
    const negative = total < 0n;
    let s = (negative ? -total : total).toString();
    if (this.scale > 0) {
      s = s.padStart(this.scale + 1, '0');
      s = `${s.slice(0, s.length - this.scale)}.${s.slice(s.length - this.scale)}`;
    }
    return negative ? `-${s}` : s;
  }
}

function parse(x: number): [bigint, number] {
  if (!Number.isFinite(x)) throw new Error(`Cannot sum ${x}`);
  const [mantissa, exp = '0'] = String(x).toLowerCase().split('e');
  const negative = mantissa.startsWith('-');
  const [whole, frac = ''] = mantissa.replace('-', '').split('.');
  let digits = BigInt(whole + frac);
  let scale = frac.length - Number(exp);
  if (scale < 0) {
    digits *= 10n ** BigInt(-scale);
    scale = 0;
  }
  return [negative ? -digits : digits, scale];
}
