import {
  DEFAULT_ALERT_HYSTERESIS,
  SCOPE_TABLE,
  WINDOW_MS,
  type GuardContext,
  type GuardLimit,
  type LimitType,
  type Scope,
  type Window,
} from '@tollgate/contracts';
import { createHash } from 'node:crypto';
import { scopeIdOf } from '../budgets/effective-limits';
import { systemEventId, type BudgetThresholdCrossed } from '../events';
import type { UsageTotals } from '../budgets/guard-decision';
import { convertMicros, type UnitRates } from '../budgets/money';
import type { StoredPolicy } from '../budgets/stored-policy';

const MICRO = 1_000_000;

/** What alerts: a threshold of a budget's limit, or the budget's exhaustion (a hard denial). */
export type AlertKind = 'threshold' | 'exhausted';

/** A budget's alert, with its state as stored (missing: armed, never fired). */
export interface AlertState {
  scopeKey: string;
  /** null for a run budget. */
  window: Window | null;
  source: string;
  limitType: LimitType;
  kind: AlertKind;
  /** Percent of the limit (100 for `exhausted`). */
  threshold: number;
  /** Micro-units for cost, tokens otherwise. */
  limit: number;
  /** The limit's unit: a currency for cost, `tokens` otherwise. */
  unit: string;
  hysteresis: number;
  fired: boolean;
  firedCount: number;
}

/** One stored step (or one correction of its cost) of the commit, in the order it was written. */
export interface StepContribution {
  /** The step's event id (named by the alert it crosses). */
  eventId: string;
  /** A reprice's correction: its own event id (the commit wrote it, not the step). */
  correctionId?: string;
  occurredAt: Date;
  /** Every scope key the step counts under (see scopeKeysOf). */
  scopeKeys: readonly string[];
  inputTokens: number;
  outputTokens: number;
  /** Priced cost added (a correction: new − old), per unit. */
  costByUnit: Record<string, number>;
}

export const stateKey = (s: Pick<AlertState, 'scopeKey' | 'window' | 'source' | 'limitType' | 'kind' | 'threshold'>) =>
  [s.scopeKey, s.window ?? '', s.source, s.limitType, s.kind, s.threshold].join('\u001f');

const SCOPE_OF = (scopeKey: string) => scopeKey.slice(0, scopeKey.indexOf(':')) as Scope;

const LIMITS: readonly [LimitType, keyof StoredPolicy][] = [
  ['cost', 'max_cost_micros'],
  ['totalTokens', 'max_total_tokens'],
  ['inputTokens', 'max_input_tokens'],
  ['outputTokens', 'max_output_tokens'],
];

/** Whether any policy names alert thresholds (else ingest keeps its one-statement path). */
export const policiesAlert = (policies: readonly StoredPolicy[]) => policies.some((p) => (p.alerts?.length ?? 0) > 0);

/** The scopes whose keys a commit must lock to alert exactly once: those of a policy with thresholds. */
export const alertingScopes = (policies: readonly StoredPolicy[]) =>
  new Set(policies.filter((p) => (p.alerts?.length ?? 0) > 0).map((p) => p.scope));

/**
 * The armed-by-default alert states of the policies' thresholds on `scopeKeys`, one per
 * (policy, limit, threshold). The scope's usage is what is compared, whatever entity a policy
 * is limited to (as GET /v1/guard/usage shows it).
 */
export function policyAlerts(
  policies: readonly StoredPolicy[],
  scopeKeys: Iterable<string>,
  projectCostUnit: string,
): AlertState[] {
  const out: AlertState[] = [];
  for (const scopeKey of scopeKeys) {
    const scope = SCOPE_OF(scopeKey);
    for (const p of policies) {
      if (p.scope !== scope || !p.alerts?.length) continue;
      for (const [limitType, column] of LIMITS) {
        const max = p[column];
        if (max === null || max === undefined) continue;
        for (const threshold of p.alerts) {
          out.push({
            scopeKey,
            window: scope === 'run' ? null : (p.window as Window),
            source: `policy:${p.name}`,
            limitType,
            kind: 'threshold',
            threshold,
            limit: Number(max),
            unit: limitType === 'cost' ? (p.cost_unit ?? projectCostUnit) : 'tokens',
            hysteresis: p.alert_hysteresis ?? DEFAULT_ALERT_HYSTERESIS,
            fired: false,
            firedCount: 0,
          });
        }
      }
    }
  }
  return out;
}

/** The alert states a check's request limits name (source `request`), armed unless stored otherwise. */
export function requestAlerts(
  limits: readonly GuardLimit[],
  context: GuardContext,
  projectCostUnit: string,
): AlertState[] {
  const out: AlertState[] = [];
  for (const l of limits) {
    const id = scopeIdOf(context, l.scope);
    if (!l.alerts?.length || !id) continue;
    const each: [LimitType, number | undefined][] = [
      ['cost', l.maxCost === undefined ? undefined : Math.round(l.maxCost * MICRO)],
      ['totalTokens', l.maxTotalTokens],
      ['inputTokens', l.maxInputTokens],
      ['outputTokens', l.maxOutputTokens],
    ];
    for (const [limitType, limit] of each) {
      if (limit === undefined) continue;
      for (const threshold of l.alerts) {
        out.push({
          scopeKey: `${l.scope}:${id}`,
          window: l.scope === 'run' ? null : l.window,
          source: 'request',
          limitType,
          kind: 'threshold',
          threshold,
          limit,
          unit: limitType === 'cost' ? (l.costUnit ?? projectCostUnit) : 'tokens',
          hysteresis: l.alertHysteresis ?? DEFAULT_ALERT_HYSTERESIS,
          fired: false,
          firedCount: 0,
        });
      }
    }
  }
  return out;
}

/** A budget's committed usage (reservations are not usage yet) in the limit's own unit. */
export function committedValue(
  limitType: LimitType,
  unit: string,
  u: Pick<UsageTotals, 'inputTokens' | 'outputTokens' | 'costByUnit'>,
  money: UnitRates,
): number {
  switch (limitType) {
    case 'totalTokens':
      return u.inputTokens + u.outputTokens;
    case 'inputTokens':
      return u.inputTokens;
    case 'outputTokens':
      return u.outputTokens;
    case 'cost':
      // Money in a unit with no rate to the limit's is not in it (the guard reports it apart).
      return Object.entries(u.costByUnit).reduce(
        (sum, [from, micros]) => sum + (convertMicros(micros, from, unit, money) ?? 0),
        0,
      );
  }
}

const inWindow = (window: Window | null, occurredAt: Date, now: Date) =>
  window === null || occurredAt.getTime() >= now.getTime() - WINDOW_MS[window];

export interface AlertOutcome {
  /** States to store: every one that fired or re-armed. */
  changed: AlertState[];
  events: BudgetThresholdCrossed[];
}

/**
 * What a commit alerts, decided under the scopes' alert locks, so commits are decided one after
 * the other: `usage` is the committed usage after this commit, and the usage before it is that
 * minus what the commit's steps added inside each window. Per alert state:
 * - a fired threshold of a rolling window re-arms when the usage before this commit was
 *   `hysteresis` points below it (usage only falls by aging out, so its lowest point since the
 *   last commit is just before this one); a run's thresholds never re-arm; an exhausted budget
 *   re-arms below 100 − hysteresis percent;
 * - an armed threshold fires when the usage after is at or above it: one event, naming the step
 *   with which the running total reached it.
 */
export function decideAlerts(
  states: readonly AlertState[],
  usage: ReadonlyMap<string, Pick<UsageTotals, 'inputTokens' | 'outputTokens' | 'costByUnit'>>,
  steps: readonly StepContribution[],
  money: UnitRates,
  now: Date,
): AlertOutcome {
  const changed: AlertState[] = [];
  const events: BudgetThresholdCrossed[] = [];
  for (const state of states) {
    const touching = steps.filter(
      (s) => s.scopeKeys.includes(state.scopeKey) && inWindow(state.window, s.occurredAt, now),
    );
    if (!steps.some((s) => s.scopeKeys.includes(state.scopeKey))) continue;
    const totals = usage.get(state.window ? `${state.scopeKey}@${state.window}` : state.scopeKey);
    if (!totals) continue;
    const value = (u: Pick<UsageTotals, 'inputTokens' | 'outputTokens' | 'costByUnit'>) =>
      committedValue(state.limitType, state.unit, u, money);
    const after = value(totals);
    const added = touching.map(value);
    const before = after - added.reduce((a, b) => a + b, 0);
    const next = { ...state };
    const rearmBelow = ((state.kind === 'exhausted' ? 100 : state.threshold) - state.hysteresis) / 100;
    if (next.fired && (state.window !== null || state.kind === 'exhausted') && before < state.limit * rearmBelow)
      next.fired = false;
    const level = (state.limit * state.threshold) / 100;
    if (state.kind === 'threshold' && !next.fired && after >= level) {
      next.fired = true;
      next.firedCount += 1;
      let running = before;
      const crossing =
        touching.find((_, i) => (running += added[i]) >= level) ??
        touching[0] ??
        steps.find((s) => s.scopeKeys.includes(state.scopeKey));
      events.push(thresholdEvent(next, after, crossing?.eventId ?? null, now));
    }
    if (next.fired !== state.fired) changed.push(next);
  }
  return { changed, events };
}

/** Deterministic per (budget, threshold, n-th firing): a retried commit cannot alert twice. */
export const alertEventId = (s: AlertState, sequence: number) => `${alertEventPrefix(s)}${sequence}`;

/** `tg:alert:<kind>:<digest of the budget and threshold>:`, to which the firing's number is appended. */
export const alertEventPrefix = (s: AlertState) =>
  systemEventId('alert', s.kind, createHash('sha256').update(stateKey(s)).digest('hex').slice(0, 24), '');

const shown = (s: Pick<AlertState, 'limitType'>, v: number) => (s.limitType === 'cost' ? v / MICRO : v);

/** The scope id column an alert is filed under, so it is listed with its scope. */
export function alertScopes(scopeKey: string) {
  const scope = SCOPE_OF(scopeKey);
  const id = scopeKey.slice(scope.length + 1);
  return { [SCOPE_TABLE[scope].field]: id };
}

function thresholdEvent(s: AlertState, usage: number, stepEventId: string | null, now: Date): BudgetThresholdCrossed {
  return {
    type: 'BudgetThresholdCrossed',
    eventId: alertEventId(s, s.firedCount),
    occurredAt: now,
    scopes: alertScopes(s.scopeKey),
    data: {
      scope: SCOPE_OF(s.scopeKey),
      scopeKey: s.scopeKey,
      window: s.window,
      source: s.source,
      limitType: s.limitType,
      threshold: s.threshold,
      hysteresis: s.hysteresis,
      usage: shown(s, usage),
      limit: shown(s, s.limit),
      unit: s.unit,
      stepEventId,
      sequence: s.firedCount,
    },
  };
}
