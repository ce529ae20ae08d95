import type { GuardCheckRequest, GuardCheckResponse, TollgateGuardClient } from '../tollgate/guard-client';
import type { CheckAhead, RunState } from './run-state';

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

/**
 * The checks ahead of one guard's runs: sent when a step ends with tool calls, taken by the next
 * step when they hold what it asks, released otherwise (see the `checkAhead` option).
 */
export class ChecksAhead {
  constructor(
    private readonly client: TollgateGuardClient,
    /** Releases a reservation (logged with `why` when that fails). */
    private readonly release: (reservationId: string, why: string) => Promise<boolean>,
    /** The `checkAheadTokens` option: input tokens a check ahead holds for tool results. */
    private readonly roomTokens: number,
  ) {}

  /** Checks the step after `stepNumber` ahead of it, while this one runs its tools (see `checkAhead`). */
  send(run: RunState, stepNumber: number, outputTokens: number): void {
    const allowed = run.allowed;
    // A client that cannot release would leave a check ahead no step took holding until it expires.
    if (!allowed || allowed.stepNumber !== stepNumber || !this.client.guard.release) return;
    this.drop(run);
    const roomTokens = run.aheadRoom ?? this.roomTokens;
    const request = aheadOf(allowed.request, `${run.runKey}:${stepNumber + 1}:ahead`, outputTokens, roomTokens);
    let answer: Promise<GuardCheckResponse | undefined>;
    try {
      answer = this.client.guard.check(request, { busyDeadlineMs: 0 }).then(
        (response) => response,
        () => undefined,
      );
    } catch {
      return; // a client that throws at once: the step is checked on its own
    }
    const ahead: CheckAhead = { stepNumber: stepNumber + 1, request, roomTokens, answer };
    ahead.timer = setTimeout(() => run.ahead === ahead && this.drop(run), CHECK_AHEAD_HOLD_MS);
    ahead.timer.unref?.();
    run.ahead = ahead;
  }

  /**
   * The answer of the check sent ahead of this step, when it holds what `own` asks and Tollgate
   * took it; undefined otherwise (and a check ahead that holds something else is released).
   */
  take(run: RunState, stepNumber: number, own: GuardCheckRequest): Promise<GuardCheckResponse | undefined> | undefined {
    const ahead = run.ahead;
    if (!ahead) return undefined;
    if (ahead.stepNumber !== stepNumber || !covers(ahead.request, own)) {
      // Tool results longer than the room held: the run's next checks ahead hold what these took.
      const took = own.estimate!.inputTokens - (ahead.request.estimate!.inputTokens - ahead.roomTokens);
      if (took > ahead.roomTokens) run.aheadRoom = Math.ceil(took * 1.25);
      this.drop(run);
      return undefined;
    }
    run.ahead = undefined;
    clearTimeout(ahead.timer);
    return ahead.answer.then((response) => {
      if (response && fitsPlainly(response)) return response;
      this.releaseUntaken(run, response);
      return undefined;
    });
  }

  /** Drops the check ahead: once answered, its reservation (if any) is released. */
  drop(run: RunState): void {
    const ahead = run.ahead;
    if (!ahead) return;
    run.ahead = undefined;
    clearTimeout(ahead.timer);
    this.releaseUntaken(run, ahead.answer);
  }

  /** Releases what a check ahead no step took reserved; the run's drain waits for it. */
  private releaseUntaken(
    run: RunState,
    answer: GuardCheckResponse | undefined | Promise<GuardCheckResponse | undefined>,
  ): void {
    const done = Promise.resolve(answer).then(async (response) => {
      if (response?.reservation) await this.release(response.reservation.id, 'checked ahead and not taken');
    });
    run.inFlight.add(done);
    void done.finally(() => run.inFlight.delete(done));
  }
}
