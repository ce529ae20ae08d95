import type { ModelShape, RequestContextShape, TracingShape } from '../mastra-shapes';
import type { GuardContext, GuardScope } from './guard-client';
import { scopeIdIn } from '../../../contracts/src/scopes';

/**
 * Reads the scope ids of the current step the way Mastra stores them: memory ids under
 * `mastra__resourceId` / `mastra__threadId` (or the `MastraMemory` entry), user, organization and
 * session under plain keys, and the trace id from the current span.
 */
export function readContextIds(requestContext: RequestContextShape | undefined, tracing: TracingShape): GuardContext {
  const get = (key: string): string | undefined => {
    const value = requestContext?.get(key);
    return typeof value === 'string' && value.length > 0 ? value : undefined;
  };
  const memory = requestContext?.get('MastraMemory') as { resourceId?: unknown; thread?: { id?: unknown } } | undefined;
  const memoryResource = typeof memory?.resourceId === 'string' ? memory.resourceId : undefined;
  const memoryThread = typeof memory?.thread?.id === 'string' ? memory.thread.id : undefined;
  const ids: GuardContext = {
    traceId: tracing.tracing?.currentSpan?.traceId ?? tracing.tracingContext?.currentSpan?.traceId,
    resourceId: get('mastra__resourceId') ?? memoryResource,
    threadId: get('mastra__threadId') ?? memoryThread,
    userId: get('userId'),
    organizationId: get('organizationId'),
    sessionId: get('sessionId'),
  };
  for (const key of Object.keys(ids) as Array<keyof GuardContext>) if (ids[key] === undefined) delete ids[key];
  return ids;
}

/** The id a scope is keyed by, or undefined when the step does not carry it. As in Tollgate, the run is the trace, and `runId` stands in when there is no trace id. */
export function scopeId(scope: GuardScope, ids: GuardContext): string | undefined {
  return scopeIdIn(ids, scope);
}

/** `openai.chat` / `gpt-4o`, or a router id `openai/gpt-4o`, as provider and model. */
export function modelIds(model: ModelShape | undefined): { provider: string; model: string } {
  if (typeof model === 'string') {
    const slash = model.indexOf('/');
    return slash < 0
      ? { provider: 'unknown', model }
      : { provider: model.slice(0, slash), model: model.slice(slash + 1) };
  }
  return { provider: (model?.provider ?? 'unknown').split('.')[0]!, model: model?.modelId ?? 'unknown' };
}
