import type { ModelShape } from '../mastra-shapes';
import { modelIds } from '../tollgate/context-ids';
import type { GuardAdjust } from '../tollgate/guard-client';
import type { CostGuardStepResult } from './mastra-args';
import type { CostGuardOptions, FallbackModel } from './options';
import { reportingModel, type CostGuardStepReport } from './step-report';

/**
 * What a step's check asks so that Tollgate may shrink it (`onExceed: 'shrink'`): nothing for a
 * step already at (or under) the floor, which cannot be shrunk and is checked as it is.
 */
export function shrinkFields(
  options: Pick<CostGuardOptions, 'onExceed' | 'minOutputTokens'>,
  requestedMaxOutputTokens: number,
): { onExceed: 'shrink'; minOutputTokens: number } | Record<string, never> {
  const minOutputTokens = options.minOutputTokens ?? 1;
  const shrink = options.onExceed === 'shrink' && requestedMaxOutputTokens > minOutputTokens;
  return shrink ? { onExceed: 'shrink' as const, minOutputTokens } : {};
}

/**
 * The step's changed settings, and its model wrapped so that its result reports the change: a
 * lower `maxOutputTokens` (Tollgate's `adjust`), and the model it runs on when it was moved from
 * `movedFrom` to the fallback model.
 */
export function adjustedStep(
  processorId: string,
  modelSettings: { maxOutputTokens?: number } | undefined,
  adjust: GuardAdjust,
  model: ModelShape | FallbackModel | undefined,
  movedFrom: ModelShape | undefined,
  requestedMaxOutputTokens: number,
): CostGuardStepResult {
  const name = (m: ModelShape | undefined) => {
    const { provider, model: modelId } = modelIds(m);
    return `${provider}/${modelId}`;
  };
  const report: CostGuardStepReport = {
    processorId,
    maxOutputTokens: adjust.maxOutputTokens,
    requestedMaxOutputTokens,
    ...(movedFrom !== undefined ? { model: name(model), requestedModel: name(movedFrom) } : {}),
    limitedBy: adjust.limitedBy.map((f) => ({
      scopeKey: f.scopeKey,
      limitType: f.limitType,
      usage: f.usage,
      limit: f.limit,
      unit: f.unit,
      source: f.source,
    })),
  };
  return {
    ...(adjust.maxOutputTokens < requestedMaxOutputTokens
      ? { modelSettings: { ...modelSettings, maxOutputTokens: adjust.maxOutputTokens } }
      : {}),
    model: reportingModel(model, report),
  };
}
