import type { GuardCheckRequest, GuardCheckResponse } from '../tollgate/guard-client';

/**
 * A step's check sent while the step before it runs its tools: tentative (Tollgate reserves it
 * only when it fits with nothing to report, and logs nothing otherwise), sized for the messages
 * of the step before plus its answer and room for the tool results. The next step takes it when
 * its own estimate is no larger and nothing else about the check changed, and starts without
 * waiting on Tollgate; otherwise it is released and the step is checked as usual.
 */
export interface CheckAhead {
  /** The step it is for. */
  stepNumber: number;
  request: GuardCheckRequest;
  /** Input tokens it holds for the tool results of the step before. */
  roomTokens: number;
  /** Undefined when the check failed (the step is then checked as usual). */
  answer: Promise<GuardCheckResponse | undefined>;
  /** Releases it when no step took it in time (a run that ended after its tools). */
  timer?: ReturnType<typeof setTimeout>;
}

/** Input tokens a check ahead adds for the tool results, by default. */
export const CHECK_AHEAD_TOKENS = 1_024;
/** How long a check ahead waits for its step before its reservation is released. */
export const CHECK_AHEAD_HOLD_MS = 30_000;

/**
 * The check ahead of the step after the one `own` checked: the same check, tentative, for the
 * input of `own` plus the step's `outputTokens` and `roomTokens` for what its tools return. It
 * never shrinks: a step that needs shrinking is checked on its own.
 */
export function aheadOf(own: GuardCheckRequest, stepId: string, outputTokens: number, roomTokens: number) {
  const { onExceed: _onExceed, minOutputTokens: _minOutputTokens, ...request } = own;
  const estimate = own.estimate!;
  return {
    ...request,
    estimate: { ...estimate, inputTokens: estimate.inputTokens + outputTokens + roomTokens },
    stepId,
    tentative: true,
  } satisfies GuardCheckRequest;
}

/**
 * Whether the check sent ahead holds what the step's own check would: the same scopes, limits,
 * model and output cap, and at least its input tokens.
 */
export function covers(ahead: GuardCheckRequest, own: GuardCheckRequest): boolean {
  const a = ahead.estimate;
  const o = own.estimate;
  if (!a || !o || a.provider !== o.provider || a.model !== o.model) return false;
  if (a.maxOutputTokens !== o.maxOutputTokens || a.inputTokens < o.inputTokens) return false;
  return (
    ahead.failMode === own.failMode &&
    JSON.stringify(ahead.context) === JSON.stringify(own.context) &&
    JSON.stringify(ahead.limits) === JSON.stringify(own.limits)
  );
}

/** Allowed and reserved with nothing to report: a check ahead the step can run on, or one to check ahead from. */
export function fitsPlainly(response: GuardCheckResponse): boolean {
  return (
    response.decision === 'allow' &&
    !response.reason &&
    !response.adjust &&
    response.warnings.length === 0 &&
    response.reservation !== undefined
  );
}
