/**
 * How a cost guard changed a step, as the step's result reports it under
 * `providerMetadata.tollgate.costGuard` (`result.steps[n].providerMetadata`, and the `finish`
 * part of a stream).
 */
export interface CostGuardStepReport {
  /** `'cost-guard'` or `'token-cost-control'`. */
  processorId: string;
  /** The output cap the step ran with. */
  maxOutputTokens: number;
  /** The cap it asked for (its `modelSettings.maxOutputTokens`, or the guard's default). */
  requestedMaxOutputTokens: number;
  /** `provider/model` the step ran on, when it was moved to the `fallbackModel`. */
  model?: string;
  /** `provider/model` it was meant to run on, when it was moved. */
  requestedModel?: string;
  /** The limits the step as asked would have broken. */
  limitedBy: Array<{ scopeKey: string; limitType: string; usage: number; limit: number; unit: string; source: string }>;
}

type CallOptions = { maxOutputTokens?: number } & Record<string, unknown>;
type Metadata = Record<string, Record<string, unknown>> | undefined;
type Part = { type: string; providerMetadata?: Metadata };
type Parts = ReadableStream<Part>;
interface ModelCalls {
  doGenerate(options: CallOptions): PromiseLike<{ providerMetadata?: Metadata } & Record<string, unknown>>;
  doStream(options: CallOptions): PromiseLike<{ stream: Parts } & Record<string, unknown>>;
}

const isModel = (model: unknown): model is ModelCalls =>
  typeof model === 'object' &&
  model !== null &&
  typeof (model as ModelCalls).doGenerate === 'function' &&
  typeof (model as ModelCalls).doStream === 'function';

const withReport = (metadata: Metadata, report: CostGuardStepReport): Metadata => ({
  ...metadata,
  tollgate: { ...metadata?.['tollgate'], costGuard: { ...report } },
});

/**
 * The step's model, as itself for every purpose but two: a call is capped at the report's
 * `maxOutputTokens` (whatever a later processor sets), and its result (the `finish` part of a
 * stream) carries the report in its provider metadata, which is where the step's result gets
 * its own. A model given by id (a string) is returned as it is.
 */
export function reportingModel<M>(model: M, report: CostGuardStepReport): M {
  if (!isModel(model)) return model;
  const cap = (options: CallOptions): CallOptions => ({
    ...options,
    maxOutputTokens: Math.min(options.maxOutputTokens ?? Infinity, report.maxOutputTokens),
  });
  const reported = (stream: Parts) =>
    stream.pipeThrough(
      new TransformStream<Part, Part>({
        transform(part, controller) {
          controller.enqueue(
            part.type === 'finish' ? { ...part, providerMetadata: withReport(part.providerMetadata, report) } : part,
          );
        },
      }),
    );
  const calls: ModelCalls = {
    doGenerate: async (options) => {
      const result = await model.doGenerate(cap(options));
      // Mastra's own model wrapper answers generate calls with a stream of parts too.
      const stream = result['stream'] instanceof ReadableStream ? { stream: reported(result['stream'] as Parts) } : {};
      return { ...result, providerMetadata: withReport(result.providerMetadata, report), ...stream };
    },
    doStream: async (options) => {
      const result = await model.doStream(cap(options));
      return { ...result, stream: reported(result.stream) };
    },
  };
  return new Proxy(model as object, {
    get(target, property) {
      if (property === 'doGenerate') return calls.doGenerate;
      if (property === 'doStream') return calls.doStream;
      const value: unknown = Reflect.get(target, property, target);
      // Methods run on the model itself, so class models with private fields keep working.
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as M;
}
