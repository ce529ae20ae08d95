import type { ModelShape } from '../mastra-shapes';
import { modelIds } from '../tollgate/context-ids';
import type { GuardCheckRequest, GuardContext } from '../tollgate/guard-client';
import type { CostGuardStepArgs } from './mastra-args';
import type { GuardConfig } from './options';
import { attempt, pendingStep, type PendingStep, type RunState } from './run-state';
import { shrinkFields } from './shrink';

/** What the checks of one step share: its id, its output cap, its own check, and the same check for another model. */
export interface StepCheck {
  /** The step's id for Tollgate (a step Mastra runs again after an API error is a new step; a busy retry is not). */
  stepId: string;
  /** The step's `modelSettings.maxOutputTokens`, or the guard's default. */
  requestedMaxOutputTokens: number;
  /** The step, as it is recorded once it ran. */
  step: PendingStep;
  /** The step's own check, on its own model. */
  own: GuardCheckRequest;
  /** The step's check on `model`, under the step id `id`. */
  requestFor(model: ModelShape | undefined, id: string): GuardCheckRequest;
}

/**
 * The step's check: the guard's limit on this request's `maxCost`, and an estimate of the step
 * (`inputTokens` counted from its messages, its output cap), reserved under its step id.
 */
export function planStepCheck<Id extends string>(
  config: GuardConfig<Id>,
  args: Pick<CostGuardStepArgs, 'agent' | 'modelSettings' | 'stepNumber' | 'model'>,
  run: RunState,
  ids: GuardContext,
  maxCost: number,
  inputTokens: number,
): StepCheck {
  const { options, scope, window } = config;
  const entityName = args.agent?.name ?? args.agent?.id;
  const context: GuardContext = { ...ids, entityType: 'agent', ...(entityName ? { entityName } : {}) };
  const failMode = options.failMode ?? 'open';
  const requestedMaxOutputTokens = args.modelSettings?.maxOutputTokens ?? options.defaultMaxOutputTokens ?? 4_096;
  const shrink = shrinkFields(options, requestedMaxOutputTokens);
  // A step Mastra runs again (after an API error) is a new step for Tollgate; a busy retry is not.
  const stepId = `${run.runKey}:${args.stepNumber}${attempt(run, args.stepNumber)}`;
  const requestFor = (model: ModelShape | undefined, id: string): GuardCheckRequest => {
    const ids = modelIds(model);
    return {
      context,
      limits: [
        {
          scope,
          ...(scope === 'run' ? {} : { window }),
          maxCost,
          ...(options.warnAtPercent !== undefined ? { warnAtPercent: options.warnAtPercent } : {}),
        },
      ],
      estimate: { provider: ids.provider, model: ids.model, inputTokens, maxOutputTokens: requestedMaxOutputTokens },
      reserve: true,
      stepId: id,
      failMode,
      ...shrink,
    };
  };
  const step = pendingStep(args.stepNumber, args.model, context);
  return { stepId, requestedMaxOutputTokens, step, own: requestFor(args.model, stepId), requestFor };
}
