import { WINDOW_MS, type UsageForecast, type Window } from '@tollgate/contracts';
import type { EffectiveLimit, UsageTotals } from '../budgets/guard-decision';
import { convertMicros, type UnitRates } from '../budgets/money';

const HOUR = 3600_000;
const MICRO = 1_000_000;

const moneyIn = (unit: string, byUnit: Record<string, number>, money: UnitRates) =>
  Object.entries(byUnit).reduce((sum, [from, micros]) => sum + (convertMicros(micros, from, unit, money) ?? 0), 0);

/**
 * A windowed budget's burn rate — its committed usage in the last hour of the window, per hour —
 * and, for each limit on it, when the limit is reached at that rate: `asOf` when usage (committed
 * and reserved, as the guard counts it) is already there, null when the rate is zero or the limit
 * is further away than one window length at that rate.
 */
export function forecastOf(
  window: Window,
  limits: readonly EffectiveLimit[],
  usage: UsageTotals,
  lastHour: UsageTotals,
  money: UnitRates,
  asOf: Date,
): UsageForecast {
  const units = Object.keys(lastHour.costByUnit).filter((u) => lastHour.costByUnit[u] > 0);
  const costUnit = units.length === 0 ? null : units.length === 1 ? units[0] : money.base;
  const burnRate = {
    cost: costUnit === null ? 0 : moneyIn(costUnit, lastHour.costByUnit, money) / MICRO,
    costUnit,
    totalTokens: lastHour.inputTokens + lastHour.outputTokens,
    inputTokens: lastHour.inputTokens,
    outputTokens: lastHour.outputTokens,
  };
  const reached: UsageForecast['limits'] = [];
  for (const l of limits) {
    const each: [UsageForecast['limits'][number]['limitType'], number | undefined, number, number, string, number][] = [
      [
        'cost',
        l.maxCostMicros,
        moneyIn(l.costUnit, { ...sum(usage.costByUnit, usage.reservedCostByUnit) }, money),
        moneyIn(l.costUnit, lastHour.costByUnit, money),
        l.costUnit,
        MICRO,
      ],
      [
        'totalTokens',
        l.maxTotalTokens,
        usage.inputTokens + usage.outputTokens + usage.reservedInputTokens + usage.reservedOutputTokens,
        lastHour.inputTokens + lastHour.outputTokens,
        'tokens',
        1,
      ],
      [
        'inputTokens',
        l.maxInputTokens,
        usage.inputTokens + usage.reservedInputTokens,
        lastHour.inputTokens,
        'tokens',
        1,
      ],
      [
        'outputTokens',
        l.maxOutputTokens,
        usage.outputTokens + usage.reservedOutputTokens,
        lastHour.outputTokens,
        'tokens',
        1,
      ],
    ];
    for (const [limitType, max, used, perHour, unit, scale] of each) {
      if (max === undefined) continue;
      let at: number | null;
      if (used >= max) at = asOf.getTime();
      else if (perHour <= 0) at = null;
      else {
        const ms = Math.ceil(((max - used) / perHour) * HOUR);
        at = ms > WINDOW_MS[window] ? null : asOf.getTime() + ms;
      }
      reached.push({
        source: l.source,
        limitType,
        limit: max / scale,
        unit,
        reachedAt: at === null ? null : new Date(at).toISOString(),
      });
    }
  }
  const times = reached.flatMap((r) => (r.reachedAt ? [r.reachedAt] : [])).sort();
  return { burnRate, limits: reached, limitReachedAt: times[0] ?? null };
}

function sum(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = (out[k] ?? 0) + v;
  return out;
}
