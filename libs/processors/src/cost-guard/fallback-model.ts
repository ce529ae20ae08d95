import { modelIds } from '../tollgate/context-ids';
import type { ServedCheck } from '../tollgate/busy-retry';
import type { GuardCheckRequest, GuardCheckResponse, GuardFinding } from '../tollgate/guard-client';
import type { CostGuardStepArgs, CostGuardStepResult } from './mastra-args';
import type { FallbackModel, GuardLog } from './options';
import { pendingStep, type RunState } from './run-state';
import { adjustedStep } from './shrink';
import type { StepCheck } from './step-check';

/** What moving a step to the fallback model needs from the exact mode. */
export interface FallbackGuard {
  processorId: string;
  /** The `fallbackModel` option. */
  fallbackModel?: FallbackModel;
  log: GuardLog;
  /** `client.guard.check`, retried while Tollgate answers busy. */
  ask(request: GuardCheckRequest): Promise<ServedCheck>;
}

/**
 * The step does not fit on its own model: when a `fallbackModel` is configured (another
 * model), the step is checked and reserved on it, and runs on it if that fits. Undefined when
 * it does not (or cannot be asked): the step is then denied on its own model's finding.
 */
export async function tryFallbackModel(
  guard: FallbackGuard,
  args: Pick<CostGuardStepArgs, 'stepNumber' | 'model' | 'modelSettings'>,
  run: RunState,
  check: StepCheck,
  violations: GuardFinding[],
): Promise<CostGuardStepResult | undefined> {
  const fallback = guard.fallbackModel;
  if (!fallback) return undefined;
  const denied = check.step;
  const target = modelIds(fallback);
  if (target.provider === denied.provider && target.model === denied.model) return undefined;
  let response: GuardCheckResponse;
  try {
    ({ response } = await guard.ask(check.requestFor(fallback, `${check.stepId}:fallback`)));
  } catch (error) {
    guard.log(
      `Cost guard: could not check step ${args.stepNumber} on the fallback model ${target.provider}/${target.model}: ${(error as Error)?.message ?? String(error)}`,
    );
    return undefined;
  }
  if (response.decision !== 'allow' || response.reason) return undefined;
  // The step runs on the fallback: its usage settles the fallback's reservation, under its ids.
  run.pending.splice(run.pending.indexOf(denied), 1);
  run.pending.push({
    ...pendingStep(args.stepNumber, fallback, denied.context),
    reservationId: response.reservation?.id,
  });
  const requestedMaxOutputTokens = check.requestedMaxOutputTokens;
  const adjust = response.adjust ?? {
    maxOutputTokens: requestedMaxOutputTokens,
    requestedMaxOutputTokens,
    limitedBy: [],
  };
  return adjustedStep(
    guard.processorId,
    args.modelSettings,
    { ...adjust, limitedBy: violations },
    fallback,
    args.model,
    requestedMaxOutputTokens,
  );
}
