/**
 * A project's money: the unit its limits are in unless they say otherwise, and what one unit of
 * each other currency is worth in it. Amounts in different units are never added as they are.
 */
export interface UnitRates {
  base: string;
  /** The value of one unit of a currency, in `base`. */
  rates: Readonly<Record<string, number>>;
}

const rateOf = (unit: string, r: UnitRates): number | undefined => (unit === r.base ? 1 : r.rates[unit]);

/**
 * `micros` of `from` in micro-units of `to`, rounded up (a budget is never under-counted), or null
 * when the project has no rate for one of the two.
 */
export function convertMicros(micros: number, from: string, to: string, r: UnitRates): number | null {
  if (micros === 0 || from === to) return micros;
  const a = rateOf(from, r);
  const b = rateOf(to, r);
  if (a === undefined || b === undefined) return null;
  return Math.ceil((micros * a) / b - 1e-9);
}
