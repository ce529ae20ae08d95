import { randomUUID } from 'node:crypto';
import type { ModelShape } from '../mastra-shapes';
import { modelIds } from '../tollgate/context-ids';
import type { GuardCheckRequest, GuardCheckResponse, GuardContext } from '../tollgate/guard-client';

// What the guard keeps about one request (a run of the agent) between its steps, in Mastra's
// per-request processor state.

/** A step checked by this guard, until its usage is recorded. */
export interface PendingStep {
  stepIndex: number;
  reservationId?: string;
  provider: string;
  model: string;
  /** The model's provider id as the AI SDK gives it (`anthropic.messages`): it says what its usage means. */
  providerId: string;
  specVersion?: 'v2' | 'v3';
  context: GuardContext;
  recorded: boolean;
}

/** This guard's memory of one request. */
export interface RunState {
  runKey: string;
  pending: PendingStep[];
  notified: Set<'soft' | 'hard'>;
  /** Steps recorded into a buffering client and not flushed by this guard yet (see `awaitRecords`). */
  unflushed: PendingStep[];
  /** Flushes of this run's records not yet answered (and releases of checks ahead not taken). */
  inFlight: Set<Promise<void>>;
  /** The check sent ahead of the next step, while this one runs its tools. */
  ahead?: CheckAhead;
  /** The last step's own check, when it was allowed with nothing to report: the next one's check ahead is made from it. */
  allowed?: { stepNumber: number; request: GuardCheckRequest };
  /** Input tokens the next check ahead holds for tool results: `checkAheadTokens`, or more once this run's took more. */
  aheadRoom?: number;
}

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

/** The guard's state in this request's processor `state`, made on its first step. */
export function runStateIn(state: Record<string, unknown>, key: string): RunState {
  let run = state[key] as RunState | undefined;
  if (!run) {
    run = { runKey: randomUUID(), pending: [], notified: new Set(), unflushed: [], inFlight: new Set() };
    state[key] = run;
  }
  return run;
}

/** A step about to run on `model`, not recorded yet. */
export function pendingStep(stepIndex: number, model: ModelShape | undefined, context: GuardContext): PendingStep {
  const { provider, model: modelId } = modelIds(model);
  return { stepIndex, provider, model: modelId, ...usageMeaning(model, provider), context, recorded: false };
}

/** What the step's usage will mean: the model's full provider id (`anthropic.messages`) and spec version. */
function usageMeaning(
  model: ModelShape | undefined,
  provider: string,
): Pick<PendingStep, 'providerId' | 'specVersion'> {
  if (typeof model !== 'object' || model === null) return { providerId: provider };
  const spec = (model as { specificationVersion?: unknown }).specificationVersion;
  return { providerId: model.provider ?? provider, ...(spec === 'v2' || spec === 'v3' ? { specVersion: spec } : {}) };
}

/** `''` for a step's first check, `:<n>` when Mastra runs the step again (after an API error): a new step for Tollgate. */
export function attempt(run: RunState, stepIndex: number): string {
  const earlier = run.pending.filter((p) => p.stepIndex === stepIndex).length;
  return earlier === 0 ? '' : `:${earlier}`;
}
