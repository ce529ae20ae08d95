import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';

/** One model step: a tool call, or a text answer streamed as the given deltas. */
/** A step's usage, or a function of the call's `maxOutputTokens` (a model never writes past it). */
export type ScriptedUsage =
  { input: number; output: number } | ((call: { maxOutputTokens?: number }) => { input: number; output: number });

export type ScriptedStep =
  { toolCall: { toolName: string; input: unknown }; usage?: ScriptedUsage } | { text: string[]; usage?: ScriptedUsage };

const usageOf = (scripted: ScriptedUsage | undefined, call: { maxOutputTokens?: number }) => {
  const u = typeof scripted === 'function' ? scripted(call) : (scripted ?? { input: 10, output: 5 });
  return {
    inputTokens: { total: u.input, noCache: u.input, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: u.output, text: u.output, reasoning: 0 },
  };
};

/**
 * A mock language model (AI SDK v3 spec, from `ai/test`) that plays `script` one step per call,
 * for `generate` and `stream` alike, and records every prompt it receives.
 */
export function scriptedModel(script: ScriptedStep[], ids = { provider: 'openai', modelId: 'gpt-4o' }) {
  const prompts: Array<Array<{ role: string; content: unknown }>> = [];
  const maxOutputTokens: Array<number | undefined> = [];
  let call = 0;
  const next = (options: { prompt: unknown; maxOutputTokens?: number }) => {
    prompts.push(options.prompt as Array<{ role: string; content: unknown }>);
    maxOutputTokens.push(options.maxOutputTokens);
    const step = script[Math.min(call, script.length - 1)]!;
    const id = call++;
    return { step, id };
  };
  const model = new MockLanguageModelV3({
    provider: ids.provider,
    modelId: ids.modelId,
    doGenerate: async (options) => {
      const { step, id } = next(options);
      if ('toolCall' in step) {
        return {
          content: [
            {
              type: 'tool-call',
              toolCallId: `call-${id}`,
              toolName: step.toolCall.toolName,
              input: JSON.stringify(step.toolCall.input),
            },
          ],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage: usageOf(step.usage, options),
          warnings: [],
        } as never;
      }
      return {
        content: [{ type: 'text', text: step.text.join('') }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: usageOf(step.usage, options),
        warnings: [],
      } as never;
    },
    doStream: async (options) => {
      const { step, id } = next(options);
      const chunks: unknown[] = [{ type: 'stream-start', warnings: [] }];
      if ('toolCall' in step) {
        chunks.push({
          type: 'tool-call',
          toolCallId: `call-${id}`,
          toolName: step.toolCall.toolName,
          input: JSON.stringify(step.toolCall.input),
        });
        chunks.push({
          type: 'finish',
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage: usageOf(step.usage, options),
        });
      } else {
        chunks.push({ type: 'text-start', id: 't' });
        for (const delta of step.text) chunks.push({ type: 'text-delta', id: 't', delta });
        chunks.push({ type: 'text-end', id: 't' });
        chunks.push({
          type: 'finish',
          finishReason: { unified: 'stop', raw: 'stop' },
          usage: usageOf(step.usage, options),
        });
      }
      return { stream: convertArrayToReadableStream(chunks) } as never;
    },
  });
  return { model, prompts, maxOutputTokens, calls: () => call };
}
