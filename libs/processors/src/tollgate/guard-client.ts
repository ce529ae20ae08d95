/**
 * What the processors need from a Tollgate client: `POST /v1/guard/check`, reservation release and
 * step usage recording. Structural, so `TollgateClient` from `@tollgate/sdk` fits as it is
 * (`test/sdk-compat.typecheck.ts` checks that under `tsc`), and so does a hand-written HTTP
 * wrapper. The shapes are the service's own, from `libs/contracts`, compiled into this package as
 * into the SDK's. Only types come from there (`import type`): the processors never load zod.
 */

import type { GuardCheckRequestInput, GuardCheckResponse, Scope, Window } from '../../../contracts/src/guard';
import type { StepUsageEventInput } from '../../../contracts/src/step-event';
import type { UsageCounts } from '../../../contracts/src/usage/normalize-usage';

export type {
  GuardAdjust,
  GuardCheckResponse,
  GuardContext,
  GuardEstimate,
  GuardEstimateView,
  GuardFinding,
  ScopeUsage as GuardScopeUsage,
} from '../../../contracts/src/guard';

/** Scopes a limit can apply to. */
export type GuardScope = Scope;

/** Aggregation windows. Ignored for the `run` scope. */
export type GuardWindow = Window;

/** Request body of `POST /v1/guard/check`, as a client sends it (defaults not filled in). */
export type GuardCheckRequest = GuardCheckRequestInput;

/** A limit evaluated by the guard, as a request sends it: `window` defaults to `'7d'` (ignored for `run`). */
export type GuardLimit = NonNullable<GuardCheckRequest['limits']>[number];

/** Per-call settings the processors pass to `guard.check`; a client may ignore them. */
export interface GuardCheckCallOptions {
  /**
   * What is left of the processor's own deadline for busy answers, in ms. A client that retries
   * busy answers itself (the SDK does) stops at it, so the two retry loops do not add up.
   */
  busyDeadlineMs?: number;
}

/**
 * Usage of one LLM step, as `client.events.record` takes it: the service's step event, always
 * with Tollgate's `usage` (input includes cache reads and writes, output includes reasoning), never
 * `providerUsage`. `eventId` is deterministic per step, so a retried record is deduplicated;
 * `reservationId` names the reservation the step settles.
 */
export type StepUsageEvent = Omit<StepUsageEventInput, 'usage' | 'providerUsage'> & { usage: UsageCounts };

/** The Tollgate client surface the processors call; `TollgateClient` from `@tollgate/sdk` is one. */
export interface TollgateGuardClient {
  guard: {
    /** May answer `reason: 'busy'` (see {@link GuardCheckResponse.reason}); the cost guard then retries. */
    check(request: GuardCheckRequest, options?: GuardCheckCallOptions): Promise<GuardCheckResponse>;
    /** Frees a reservation the step did not use. Optional: without it, an unused reservation expires. */
    release?(reservationId: string): Promise<unknown>;
  };
  events: {
    /**
     * May send at once (a returned promise is awaited), or buffer, as the SDK does: a client with
     * `flush` must then deliver on its own too (the SDK sends a batch within `flushIntervalMs`).
     */
    record(event: StepUsageEvent): unknown;
    /**
     * Delivers what `record` buffered. The cost guard calls it when it needs a run's usage stored:
     * before the run's last step resolves, before a denial, before asking again about a check that
     * would deny or shrink while the run's records were not stored yet, and on an API error;
     * between steps it leaves delivery to the client.
     */
    flush?(): Promise<unknown>;
  };
}

/** The key of a scope's entry in {@link GuardCheckResponse.usage}. */
export function usageKey(scope: GuardScope, id: string, window: GuardWindow | undefined): string {
  return scope === 'run' ? `run:${id}` : `${scope}:${id}@${window ?? '7d'}`;
}
