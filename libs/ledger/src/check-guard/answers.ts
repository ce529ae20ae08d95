import type { GuardCheckResponse } from '@tollgate/contracts';
import { AppError } from '@tollgate/platform';
import {
  emptyUsage,
  estimateView,
  scopeUsageView,
  usageKey,
  type CheckOutcome,
  type NewReservation,
  type UsageTotals,
} from '../budgets/guard-decision';
import { forecastOf } from '../forecast/forecast';
import type { UsageRequest } from '../scope-usage/read-scope-usage.sql';
import { readKey, stepIdOf, type LoadedCheck } from './loaded-check';
import type { ExistingReservation } from './sql/guard-batch.sql';

/** What a group commit answers one check: its response, or the client error it earned. */
export type CheckResult = { response: GuardCheckResponse } | { error: AppError };

/** Load: nothing was done for the check; the caller retries after `retryAfterMs`. */
export function busy(retryAfterMs: number, now: Date): GuardCheckResponse {
  return {
    decision: 'deny',
    reason: 'busy',
    retryAfterMs,
    violations: [],
    warnings: [],
    skipped: [],
    usage: {},
    asOf: now.toISOString(),
  };
}

/** The database cannot be reached: the caller's failMode decides. */
export function unavailable(failMode: 'open' | 'closed', now: Date): GuardCheckResponse {
  return {
    decision: failMode === 'closed' ? 'deny' : 'allow',
    reason: `guard unavailable (database unreachable); failMode ${failMode}`,
    violations: [],
    warnings: [],
    skipped: [],
    usage: {},
    asOf: now.toISOString(),
  };
}

/** A windowed usage's forecast, from its last hour as read (committed usage only). */
function forecastFor(
  check: LoadedCheck,
  r: UsageRequest,
  u: UsageTotals,
  read: ReadonlyMap<string, UsageTotals>,
  at: Date,
) {
  if (r.window === null || r.scope === 'run') return null;
  const scopeKey = `${r.scope}:${r.scopeId}`;
  const limits = check.case.limits.filter((l) => l.scopeKey === scopeKey && l.window === r.window);
  return forecastOf(r.window, limits, u, read.get(usageKey(scopeKey, '1h')) ?? emptyUsage(), check.settings.money, at);
}

/** A decided check's answer: its decision, its usage as it saw it (and forecasts), its reservation. */
export function respond(
  check: LoadedCheck,
  outcome: CheckOutcome,
  at: Date,
  read: ReadonlyMap<string, UsageTotals>,
): GuardCheckResponse {
  const usage: GuardCheckResponse['usage'] = {};
  for (const r of check.requests) {
    const key = readKey(r);
    const u = outcome.usage.get(key) ?? emptyUsage();
    usage[key] = {
      ...scopeUsageView(r.scope, r.window, u, check.settings.money),
      forecast: forecastFor(check, r, u, read, at),
    };
  }
  const { decision, violations, warnings } = outcome.decision;
  return {
    ...(outcome.declined ? { decision: 'deny', reason: 'tentative' } : { decision }),
    violations,
    warnings,
    skipped: check.skipped,
    usage,
    ...(outcome.reservation ? { reservation: reservationView(outcome.reservation) } : {}),
    ...(outcome.estimate ? { estimate: estimateView(outcome.estimate) } : {}),
    ...(outcome.adjust ? { adjust: outcome.adjust } : {}),
    asOf: at.toISOString(),
  };
}

function reservationView(r: NewReservation): NonNullable<GuardCheckResponse['reservation']> {
  return {
    id: r.id,
    estimatedCost: r.costMicros / 1e6,
    costUnit: r.costUnit || null,
    inputTokens: r.inputTokens,
    outputTokens: r.outputTokens,
    expiresAt: r.expiresAt.toISOString(),
  };
}

/** A check whose step had a reservation made earlier in the same batch: that reservation. */
export function reservedResponse(check: LoadedCheck, r: NewReservation, at: Date): GuardCheckResponse {
  return {
    decision: 'allow',
    violations: [],
    warnings: [],
    skipped: check.skipped,
    usage: {},
    reservation: reservationView(r),
    ...(check.case.estimate ? { estimate: estimateView(check.case.estimate) } : {}),
    ...heldAdjust(check, r.outputTokens),
    asOf: at.toISOString(),
  };
}

/**
 * A retried check gets the reservation its step already holds; one that was shrunk holds fewer
 * output tokens than the retry asks for, and the retry must be told so as the first answer was.
 */
function heldAdjust(check: LoadedCheck, heldOutputTokens: number): Pick<GuardCheckResponse, 'adjust'> {
  const requested = check.request.estimate?.maxOutputTokens;
  if (requested === undefined || heldOutputTokens >= requested) return {};
  return { adjust: { maxOutputTokens: heldOutputTokens, requestedMaxOutputTokens: requested, limitedBy: [] } };
}

/** A retried check for a step that already holds an open reservation gets that reservation back. */
export function retried(check: LoadedCheck, found: ExistingReservation, at: Date): CheckResult {
  const stepId = stepIdOf(check);
  const expired = Date.parse(found.expires_at) <= at.getTime();
  if (found.status !== 'open' || expired) {
    return {
      error: new AppError(
        'conflict',
        `stepId ${stepId} already had a reservation, now ${expired && found.status === 'open' ? 'lapsed' : found.status}; use a new stepId for a new step`,
        'stepId',
      ),
    };
  }
  return {
    response: {
      decision: 'allow',
      violations: [],
      warnings: [],
      skipped: check.skipped,
      usage: {},
      reservation: {
        id: found.id,
        estimatedCost: Number(found.cost_micros) / 1e6,
        costUnit: found.cost_unit || null,
        inputTokens: Number(found.input_tokens),
        outputTokens: Number(found.output_tokens),
        expiresAt: new Date(found.expires_at).toISOString(),
      },
      ...(check.case.estimate ? { estimate: estimateView(check.case.estimate) } : {}),
      ...heldAdjust(check, Number(found.output_tokens)),
      asOf: at.toISOString(),
    },
  };
}
