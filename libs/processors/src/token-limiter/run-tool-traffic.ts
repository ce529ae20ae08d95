import type { MessageListShape, MessageShape } from '../mastra-shapes';
import type { PromptMessageShape } from '../token-count/message-token-counter';

/** A finished step of the run, as Mastra passes it in `steps`: only its tool calls are read. */
export interface RunStepShape {
  content?: ReadonlyArray<{ type?: string; toolCallId?: string }>;
  toolCalls?: ReadonlyArray<{ toolCallId?: string; payload?: { toolCallId?: string } }>;
}

/** Key of the run's tool call ids in Mastra's per-run processor state. */
const RUN_TOOL_CALLS = 'tollgate.tokenLimiter.runToolCallIds';

/**
 * This run's tool calls: the one place that decides which tool traffic is the run's, so that the
 * limiter never trims it (the model acts on these results; trimmed, it would call the same tools
 * again, step after step). A message is the run's tool traffic when it carries one of these ids.
 *
 * The ids come from every source that names them, each read at every step, for none covers the
 * others: the run's finished `steps`; the run's response messages — including those Mastra's
 * save queue has drained (`drainUnsavedMessages()` empties the live response set, not the run's
 * persisted one), and those a processor put there that no step produced (`steps` is an empty
 * array at step 0); and those seen at earlier steps of the run (kept in its `state`).
 */
export function runToolCallIds(
  state: Record<string, unknown> | undefined,
  steps: ReadonlyArray<RunStepShape> | undefined,
  list: MessageListShape<MessageShape> | undefined,
): Set<string> {
  const ids = state?.[RUN_TOOL_CALLS] instanceof Set ? (state[RUN_TOOL_CALLS] as Set<string>) : new Set<string>();
  if (state) state[RUN_TOOL_CALLS] = ids;
  for (const step of steps ?? []) {
    for (const part of step.content ?? [])
      if ((part.type === 'tool-call' || part.type === 'tool-result') && part.toolCallId) ids.add(part.toolCallId);
    for (const call of step.toolCalls ?? []) {
      const id = call.toolCallId ?? call.payload?.toolCallId;
      if (id) ids.add(id);
    }
  }
  for (const message of responseMessages(list)) for (const id of toolCallIdsOf(message)) ids.add(id);
  return ids;
}

/**
 * The run's response messages, drained or not. `getPersisted.response` keeps every message added
 * to the response set in this run's list (a drain leaves it alone) and is one pass over the list
 * with no id sets built; a list without it (older Mastra) has only the live response set.
 */
function responseMessages(list: MessageListShape<MessageShape> | undefined): MessageShape[] {
  if (!list) return [];
  const persisted = list.getPersisted?.response;
  if (persisted) return persisted.db();
  const output = list.makeMessageSourceChecker?.().output;
  if (!output || output.size === 0) return [];
  return list.get.all.db().filter((message) => output.has(message.id));
}

/** Whether a message carrying these tool call ids is this run's tool traffic. */
export function isRunToolTraffic(toolCallIds: readonly string[], run: ReadonlySet<string>): boolean {
  for (const id of toolCallIds) if (run.has(id)) return true;
  return false;
}

/** Tool call ids of a stored message's tool invocations (calls and results). */
export function toolCallIdsOf(message: MessageShape): string[] {
  const ids: string[] = [];
  for (const part of message.content?.parts ?? []) {
    if (part.type === 'tool-invocation' && part.toolInvocation?.toolCallId) ids.push(part.toolInvocation.toolCallId);
  }
  return ids;
}

/** Tool call ids of a provider prompt message's tool calls and results. */
export function promptToolCallIdsOf(message: PromptMessageShape): string[] {
  if (typeof message.content === 'string') return [];
  const ids: string[] = [];
  for (const part of message.content)
    if ((part.type === 'tool-call' || part.type === 'tool-result') && part.toolCallId) ids.push(part.toolCallId);
  return ids;
}
