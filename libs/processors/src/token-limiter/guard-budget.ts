import type { MessageShape } from '../mastra-shapes';
import type { PromptMessageShape } from '../token-count/message-token-counter';
import { modelIds, readContextIds } from '../tollgate/context-ids';
import type { GuardContext } from '../tollgate/guard-client';
import type { TokenLimiterRequestArgs, TokenLimiterStepArgs } from './mastra-args';
import type { TokenLimiterGuardOptions } from './options';

/** The step's limit: `maxTokens`, or Tollgate's remaining token budget when a guard reports less. */
export async function stepLimit(
  guard: TokenLimiterGuardOptions | undefined,
  maxTokens: number,
  args: TokenLimiterStepArgs<MessageShape> | TokenLimiterRequestArgs<PromptMessageShape>,
): Promise<{ limit: number; guardRemainingTokens?: number }> {
  if (!guard) return { limit: maxTokens };
  const remaining = await remainingFromGuard(guard, maxTokens, args as TokenLimiterStepArgs<MessageShape>);
  if (remaining === undefined || remaining >= maxTokens) return { limit: maxTokens };
  return { limit: Math.max(0, remaining), guardRemainingTokens: remaining };
}

/**
 * Asks the guard (dry run: nothing reserved or audited) about a step of `maxTokens` input tokens.
 * Every token limit that step would reach, from the request or a project policy, comes back as a
 * violation with its limit and the usage including the estimate; what remains of it is
 * `limit - (usage - estimate)`. Warn-only policies and cost limits do not trim.
 */
async function remainingFromGuard<M extends MessageShape>(
  guard: TokenLimiterGuardOptions,
  maxTokens: number,
  args: TokenLimiterStepArgs<M>,
): Promise<number | undefined> {
  const context: GuardContext = {
    ...readContextIds(args.requestContext, args),
    entityType: 'agent',
    ...(args.agent?.name || args.agent?.id ? { entityName: args.agent.name ?? args.agent.id } : {}),
    ...guard.context,
  };
  const estimate = { ...modelIds(args.model), inputTokens: maxTokens, maxOutputTokens: 0 };
  let response;
  try {
    response = await guard.client.guard.check({
      context,
      ...(guard.limits ? { limits: guard.limits } : {}),
      estimate,
      dryRun: true,
      failMode: guard.failMode ?? 'open',
    });
  } catch (error) {
    if (guard.failMode !== 'closed') return undefined;
    return args.abort(
      `TokenLimiterProcessor: Tollgate guard unavailable (${(error as Error)?.message ?? String(error)})`,
      {
        retry: false,
        metadata: { systemTokens: 0, limit: maxTokens },
      },
    );
  }
  // The SDK answers for an unreachable service itself, applying failMode (`reason` says so).
  if (response.decision === 'deny' && response.violations.length === 0) {
    const why =
      response.reason === 'busy'
        ? 'Tollgate guard busy; retry the step later'
        : `Tollgate guard unavailable (${response.reason ?? 'denied without a violation'})`;
    return args.abort(`TokenLimiterProcessor: ${why}`, {
      retry: false,
      metadata: { systemTokens: 0, limit: maxTokens },
    });
  }
  let remaining: number | undefined;
  for (const v of response.violations) {
    if (v.limitType !== 'totalTokens' && v.limitType !== 'inputTokens') continue;
    // Reserved tokens (steps in flight elsewhere) are in `usage`: they will be spent.
    remaining = Math.min(remaining ?? Infinity, v.limit - (v.usage - estimate.inputTokens));
  }
  return remaining;
}
