import type { MessageShape } from '../../src/mastra-shapes';

let seq = 0;
/** Unique ids so no spec depends on another's cache entries. */
export const uid = (prefix = 'm') => `${prefix}-${++seq}-${Math.random().toString(36).slice(2, 8)}`;

/** A format-2 message with one text part. */
export function text(
  role: 'user' | 'assistant' | 'system',
  body: string,
  id = uid(),
): MessageShape & { createdAt: Date } {
  return {
    id,
    role,
    createdAt: new Date(),
    content: { format: 2, parts: [{ type: 'text', text: body }] } as MessageShape['content'],
  };
}

/** An assistant message holding one tool call and (when `result` is given) its result, as Mastra stores them. */
export function toolMessage(
  toolCallId: string,
  toolName: string,
  args: unknown,
  result?: unknown,
  id = uid(),
): MessageShape & { createdAt: Date } {
  return {
    id,
    role: 'assistant',
    createdAt: new Date(),
    content: {
      format: 2,
      parts: [
        {
          type: 'tool-invocation',
          toolInvocation:
            result === undefined
              ? { state: 'call', toolCallId, toolName, args }
              : { state: 'result', toolCallId, toolName, args, result },
        },
      ],
    } as MessageShape['content'],
  };
}

/** Thrown by {@link abort}: stands in for Mastra's TripWire in unit specs. */
export class Aborted extends Error {
  constructor(
    message: string,
    readonly options: { retry?: boolean; metadata?: unknown } | undefined,
  ) {
    super(message);
  }
}

/** An `abort` that throws like Mastra's. */
export const abort = (reason?: string, options?: { retry?: boolean; metadata?: unknown }): never => {
  throw new Aborted(reason ?? '', options);
};

/** The error `fn` throws (or rejects with); fails the test when it does not throw. */
export async function caught(fn: () => unknown): Promise<Aborted> {
  try {
    await fn();
  } catch (error) {
    return error as Aborted;
  }
  throw new Error('expected an abort');
}
