/**
 * Token usage as each provider reports it, turned into Tollgate's usage: `inputTokens` includes
 * cache reads and cache writes, `outputTokens` includes reasoning, and every breakdown field is a
 * part of its total, never added on top (DESIGN.md, "The step event").
 *
 * Providers disagree on what "input tokens" means:
 *
 * | source                           | input total                          | output total                       |
 * | -------------------------------- | ------------------------------------ | ---------------------------------- |
 * | OpenAI chat / Responses          | includes cached (and cache writes)   | includes reasoning                 |
 * | Anthropic Messages               | EXCLUDES cache reads and writes      | includes thinking                  |
 * | Gemini (AI Studio and Vertex)    | includes cached content              | EXCLUDES thoughts                  |
 * | Bedrock Converse                 | EXCLUDES cache reads and writes      | includes reasoning                 |
 * | AI SDK 6 (model spec V3)         | `inputTokens.total` includes both    | `outputTokens.total` includes it   |
 * | AI SDK 5 (model spec V2)         | the provider's own meaning, as above | the provider's own meaning         |
 *
 * Every function here returns a {@link NormalizedUsage} whose `usage` passes the service's
 * `usageSchema` whatever it is given: counts are rounded, clamped to 0…100,000,000, a missing or
 * malformed field counts as 0, and a breakdown a provider reported above its total is cut to fit.
 *
 * It imports nothing: `@tollgate/sdk` and `@tollgate/processors` compile this file in, and the
 * processors load it without zod (`libs/processors/scripts/build.mjs` fails a build that does).
 */

/** Largest token count the service accepts for one step (`MAX_TOKENS` of the step event). */
const MAX_TOKENS = 100_000_000;

/**
 * Tollgate's usage of one step: the `usage` of a step event, with the service's meaning. Written
 * out (it is the `Usage` that `usageSchema` infers) so that this file imports nothing.
 */
export interface UsageCounts {
  /** Every input token: uncached, cache reads and cache writes. */
  inputTokens: number;
  /** Every output token, reasoning included. */
  outputTokens: number;
  /** Input tokens read from a prompt cache (a part of `inputTokens`). */
  cacheReadTokens?: number;
  /** Input tokens written to a prompt cache, whatever their time to live (a part of `inputTokens`). */
  cacheWriteTokens?: number;
  /**
   * The cache writes with the 1-hour time to live (a part of `cacheWriteTokens`; the rest are
   * 5-minute writes). Anthropic and Bedrock price a 1-hour write higher than a 5-minute one.
   */
  cacheWrite1hTokens?: number;
  /** Reasoning / thinking tokens (a part of `outputTokens`). */
  reasoningTokens?: number;
  /** Audio input tokens (a part of `inputTokens`). */
  audioInputTokens?: number;
  /** Image input tokens (a part of `inputTokens`). */
  imageInputTokens?: number;
}

/**
 * What a normalizer returns: `usage` is what a step event carries, as it is. When the provider
 * says how its cache writes split between the 5-minute and the 1-hour time to live, the 1-hour
 * part is `usage.cacheWrite1hTokens` (the service prices it at the 1-hour rate, the rest at the
 * 5-minute rate). If the provider's parts do not add up to its total, the total wins and the
 * 1-hour part is kept (it is the dearer one).
 */
export interface NormalizedUsage {
  /** Tollgate's usage; always valid for the service's `usageSchema`. */
  usage: UsageCounts;
}

/** A count as a provider may send it: absent, `null`, or a number. */
type Count = number | null | undefined;

/** OpenAI Chat Completions `usage` (also the last chunk of a stream with `stream_options.include_usage`). */
export interface OpenAIChatUsage {
  /** All prompt tokens, cached ones included. */
  prompt_tokens?: Count;
  /** All completion tokens, reasoning included. */
  completion_tokens?: Count;
  /** `prompt_tokens + completion_tokens`. */
  total_tokens?: Count;
  /** Parts of `prompt_tokens`. */
  prompt_tokens_details?: { cached_tokens?: Count; audio_tokens?: Count; cache_write_tokens?: Count } | null;
  /** Parts of `completion_tokens`. */
  completion_tokens_details?: {
    reasoning_tokens?: Count;
    audio_tokens?: Count;
    accepted_prediction_tokens?: Count;
    rejected_prediction_tokens?: Count;
  } | null;
}

/** OpenAI Responses API `usage` (also `response.usage` of the `response.completed` stream event). */
export interface OpenAIResponsesUsage {
  /** All input tokens, cached ones included. */
  input_tokens?: Count;
  /** Parts of `input_tokens`. */
  input_tokens_details?: { cached_tokens?: Count; cache_write_tokens?: Count } | null;
  /** All output tokens, reasoning included. */
  output_tokens?: Count;
  /** Parts of `output_tokens`. */
  output_tokens_details?: { reasoning_tokens?: Count } | null;
  /** `input_tokens + output_tokens`. */
  total_tokens?: Count;
}

/** Anthropic Messages `usage` (the response's, `message_start`'s `message.usage`, or `message_delta`'s). */
export interface AnthropicUsage {
  /** Uncached input tokens only: cache reads and writes are NOT in it. */
  input_tokens?: Count;
  /** All output tokens, thinking included. */
  output_tokens?: Count;
  /** Input tokens read from the cache (beside `input_tokens`). */
  cache_read_input_tokens?: Count;
  /** Input tokens written to the cache, both times to live (beside `input_tokens`). */
  cache_creation_input_tokens?: Count;
  /** `cache_creation_input_tokens` by time to live. */
  cache_creation?: { ephemeral_5m_input_tokens?: Count; ephemeral_1h_input_tokens?: Count } | null;
  /** Part of `output_tokens`, where the API reports it. */
  output_tokens_details?: { thinking_tokens?: Count } | null;
}

/** One entry of Gemini's per-modality counts (`promptTokensDetails`, …). */
export interface GeminiModalityTokenCount {
  /** `TEXT`, `IMAGE`, `AUDIO`, `VIDEO`, `DOCUMENT`. */
  modality?: string | null;
  /** Tokens of that modality. */
  tokenCount?: Count;
}

/** Gemini `usageMetadata` (generateContent, and every chunk of streamGenerateContent; the last one is final). */
export interface GeminiUsageMetadata {
  /** The whole prompt, cached content included. */
  promptTokenCount?: Count;
  /** Part of `promptTokenCount` served from the context cache. */
  cachedContentTokenCount?: Count;
  /** Generated tokens, thoughts NOT included. */
  candidatesTokenCount?: Count;
  /** The Live API's name for `candidatesTokenCount`. */
  responseTokenCount?: Count;
  /** Tokens of tool-use prompts (beside `promptTokenCount`). */
  toolUsePromptTokenCount?: Count;
  /** Thinking tokens (beside `candidatesTokenCount`). */
  thoughtsTokenCount?: Count;
  /** Everything above. */
  totalTokenCount?: Count;
  /** `promptTokenCount` by modality. */
  promptTokensDetails?: ReadonlyArray<GeminiModalityTokenCount> | null;
  /** `toolUsePromptTokenCount` by modality. */
  toolUsePromptTokensDetails?: ReadonlyArray<GeminiModalityTokenCount> | null;
}

/** Bedrock Converse `usage` (also the `metadata` event of ConverseStream). */
export interface BedrockUsage {
  /** Uncached input tokens only: cache reads and writes are NOT in it. */
  inputTokens?: Count;
  /** All output tokens. */
  outputTokens?: Count;
  /** The step's total as Bedrock counts it (not read). */
  totalTokens?: Count;
  /** Input tokens read from the cache (beside `inputTokens`). */
  cacheReadInputTokens?: Count;
  /** Input tokens written to the cache (beside `inputTokens`). */
  cacheWriteInputTokens?: Count;
  /** `cacheWriteInputTokens` by time to live. */
  cacheDetails?: ReadonlyArray<{ ttl?: string | null; inputTokens?: Count }> | null;
}

/** AI SDK 6 model usage (`LanguageModelV3Usage`): totals and their parts. */
export interface AiSdkV3Usage {
  /** `total` = `noCache` + `cacheRead` + `cacheWrite`. */
  inputTokens: { total?: Count; noCache?: Count; cacheRead?: Count; cacheWrite?: Count };
  /** `total` = `text` + `reasoning`. */
  outputTokens: { total?: Count; text?: Count; reasoning?: Count };
  /** The provider's own usage object. */
  raw?: unknown;
}

/**
 * Flat usage: AI SDK 5 model usage (`LanguageModelV2Usage`), the `LanguageModelUsage` of an AI
 * SDK 6 result (with `inputTokenDetails` / `outputTokenDetails`), or Mastra's usage of a step
 * (with `raw`, the model's own usage, and `cacheCreationInputTokens`).
 */
export interface AiSdkFlatUsage {
  /** V2: the provider's meaning. AI SDK 6 result and Mastra over a V3 model: the total. */
  inputTokens?: Count;
  /** V2: the provider's meaning (Gemini leaves thoughts out). Otherwise the total. */
  outputTokens?: Count;
  /** Sum of the provider's input and output. */
  totalTokens?: Count;
  /** Reasoning tokens. */
  reasoningTokens?: Count;
  /** Cache reads. */
  cachedInputTokens?: Count;
  /** Cache writes (Mastra). */
  cacheCreationInputTokens?: Count;
  /** Cache writes with the 5-minute time to live (Mastra, from Anthropic's metadata). */
  cacheCreationInputTokens5m?: Count;
  /** Cache writes with the 1-hour time to live (Mastra, from Anthropic's metadata). */
  cacheCreationInputTokens1h?: Count;
  /** AI SDK 6 result: the parts of `inputTokens`. */
  inputTokenDetails?: { noCacheTokens?: Count; cacheReadTokens?: Count; cacheWriteTokens?: Count } | null;
  /** AI SDK 6 result: the parts of `outputTokens`. */
  outputTokenDetails?: { textTokens?: Count; reasoningTokens?: Count } | null;
  /** Mastra: the model's own usage (V3-shaped for a V3 model); AI SDK 6: the provider's. */
  raw?: unknown;
}

/** Any usage shape {@link fromAiSdk} reads. */
export type AiSdkUsage = AiSdkV3Usage | AiSdkFlatUsage;

/** What {@link fromAiSdk} needs besides the usage. */
export interface AiSdkUsageContext {
  /**
   * The model's provider id as the AI SDK names it (`anthropic.messages`, `openai.chat`,
   * `google.generative-ai`, `google.vertex.chat`, `vertex.anthropic.messages`, `amazon-bedrock`,
   * …) or a router's (`anthropic`). It decides what a V2 model's numbers mean. Empty or
   * `unknown`: the provider keys of `providerMetadata` (`anthropic`, `bedrock`, `google`) decide.
   */
  provider: string;
  /** The step's `providerMetadata`: where V2 Anthropic and Bedrock models put their cache writes. */
  providerMetadata?: Readonly<Record<string, unknown>> | null;
  /**
   * The model's `specificationVersion`. Used only when the usage's shape does not tell: nested
   * `inputTokens` / `outputTokens` objects (or a `raw` that has them, as Mastra passes), and an
   * AI SDK 6 result's `inputTokenDetails`, are V3 whatever this says. Without it, a flat usage is V2.
   */
  specVersion?: 'v2' | 'v3';
}

/**
 * Mastra's usage of a model span (`UsageStats` in `@mastra/core/observability`), also what its
 * token metrics carry (`mastra_model_total_input_tokens`, `mastra_model_input_cache_read_tokens`, …).
 */
export interface MastraUsageStats {
  /** Meant as the total of the input details. */
  inputTokens?: Count;
  /** Meant as the total of the output details. */
  outputTokens?: Count;
  /** Parts of `inputTokens`. */
  inputDetails?: {
    text?: Count;
    cacheRead?: Count;
    cacheWrite?: Count;
    cacheWrite5m?: Count;
    cacheWrite1h?: Count;
    audio?: Count;
    image?: Count;
  } | null;
  /** Parts of `outputTokens`. */
  outputDetails?: { text?: Count; reasoning?: Count; audio?: Count; image?: Count } | null;
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const objectAt = (v: unknown): Json | undefined => (isObject(v) ? v : undefined);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
/** A reported count as a whole number of tokens in 0…MAX_TOKENS; anything else is 0. */
const count = (v: unknown): number => (isCount(v) && v > 0 ? Math.min(Math.round(v), MAX_TOKENS) : 0);
/** The first of `values` that is a number (a reported 0 included). */
const firstCount = (...values: unknown[]): number | undefined => values.find(isCount) as number | undefined;

interface Parts {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
  reasoning?: number;
  audio?: number;
  image?: number;
  ttl?: { fiveMinutes?: unknown; oneHour?: unknown };
}

/** Tollgate's usage from totals that already follow its meaning, with every part cut to fit. */
function normalized(p: Parts): NormalizedUsage {
  const inputTokens = count(p.input);
  const outputTokens = count(p.output);
  const cacheReadTokens = Math.min(count(p.cacheRead), inputTokens);
  const cacheWriteTokens = Math.min(count(p.cacheWrite), inputTokens - cacheReadTokens);
  const audioInputTokens = Math.min(count(p.audio), inputTokens);
  const imageInputTokens = Math.min(count(p.image), inputTokens);
  const reasoningTokens = Math.min(count(p.reasoning), outputTokens);
  const usage: UsageCounts = { inputTokens, outputTokens };
  if (cacheReadTokens > 0) usage.cacheReadTokens = cacheReadTokens;
  if (cacheWriteTokens > 0) usage.cacheWriteTokens = cacheWriteTokens;
  const cacheWrite1hTokens = p.ttl ? Math.min(count(p.ttl.oneHour), cacheWriteTokens) : 0;
  if (cacheWrite1hTokens > 0) usage.cacheWrite1hTokens = cacheWrite1hTokens;
  if (reasoningTokens > 0) usage.reasoningTokens = reasoningTokens;
  if (audioInputTokens > 0) usage.audioInputTokens = audioInputTokens;
  if (imageInputTokens > 0) usage.imageInputTokens = imageInputTokens;
  return { usage };
}

/**
 * OpenAI usage, Chat Completions or Responses API (told apart by their field names), from a
 * response or from a stream's final usage. Both count cached tokens inside the input total and
 * reasoning tokens inside the output total, which is Tollgate's meaning already.
 *
 * @param usage - `response.usage` (chat, or the last chunk of a stream with
 *   `stream_options: { include_usage: true }`), or a Responses API `response.usage` (also in the
 *   `response.completed` stream event). `null` (a chunk without usage) counts as no usage.
 * @example
 * ```ts
 * fromOpenAI({ prompt_tokens: 2006, completion_tokens: 300, prompt_tokens_details: { cached_tokens: 1920 }, completion_tokens_details: { reasoning_tokens: 256 } }).usage;
 * // { inputTokens: 2006, outputTokens: 300, cacheReadTokens: 1920, reasoningTokens: 256 }
 * ```
 */
export function fromOpenAI(usage: OpenAIChatUsage | OpenAIResponsesUsage | null | undefined): NormalizedUsage {
  const u = objectAt(usage) ?? {};
  if (
    'prompt_tokens' in u ||
    'completion_tokens' in u ||
    'prompt_tokens_details' in u ||
    'completion_tokens_details' in u
  ) {
    const input = objectAt(u['prompt_tokens_details']) ?? {};
    const output = objectAt(u['completion_tokens_details']) ?? {};
    return normalized({
      input: count(u['prompt_tokens']),
      output: count(u['completion_tokens']),
      cacheRead: count(input['cached_tokens']),
      cacheWrite: count(input['cache_write_tokens']),
      audio: count(input['audio_tokens']),
      reasoning: count(output['reasoning_tokens']),
    });
  }
  const input = objectAt(u['input_tokens_details']) ?? {};
  const output = objectAt(u['output_tokens_details']) ?? {};
  return normalized({
    input: count(u['input_tokens']),
    output: count(u['output_tokens']),
    cacheRead: count(input['cached_tokens']),
    cacheWrite: count(input['cache_write_tokens']),
    reasoning: count(output['reasoning_tokens']),
  });
}

/** Anthropic's usage, a stream's final delta laid over its start (later non-null counts win). */
function mergedAnthropic(usage: unknown, delta: unknown): Json {
  const merged: Json = { ...(objectAt(usage) ?? {}) };
  for (const [key, value] of Object.entries(objectAt(delta) ?? {})) {
    if (value === null || value === undefined) continue;
    merged[key] = isObject(value) && isObject(merged[key]) ? { ...(merged[key] as Json), ...value } : value;
  }
  return merged;
}

/**
 * Anthropic Messages usage. Anthropic's `input_tokens` EXCLUDES `cache_read_input_tokens` and
 * `cache_creation_input_tokens`; here they are added to it. `output_tokens` includes thinking.
 * The 1-hour part of the cache writes (`cache_creation.ephemeral_1h_input_tokens`) comes back
 * as `cacheWrite1hTokens`.
 *
 * A stream reports usage twice: `message_start` carries `message.usage` (input and cache counts,
 * an early output count) and `message_delta` the final, cumulative counts (its input and cache
 * counts may be null). Pass both: the delta's non-null counts win.
 *
 * @param usage - the response's `usage`, or `message_start`'s `message.usage`.
 * @param delta - a stream's last `message_delta` `usage`, if any.
 * @example
 * ```ts
 * fromAnthropic({ input_tokens: 50, cache_read_input_tokens: 10000, cache_creation_input_tokens: 0, output_tokens: 20 }).usage;
 * // { inputTokens: 10050, outputTokens: 20, cacheReadTokens: 10000 }
 * ```
 */
export function fromAnthropic(
  usage: AnthropicUsage | null | undefined,
  delta?: AnthropicUsage | null,
): NormalizedUsage {
  const u = mergedAnthropic(usage, delta);
  const split = objectAt(u['cache_creation']);
  const fiveMinutes = split?.['ephemeral_5m_input_tokens'];
  const oneHour = split?.['ephemeral_1h_input_tokens'];
  const cacheRead = count(u['cache_read_input_tokens']);
  const cacheWrite = isCount(u['cache_creation_input_tokens'])
    ? count(u['cache_creation_input_tokens'])
    : count(fiveMinutes) + count(oneHour);
  return normalized({
    input: count(u['input_tokens']) + cacheRead + cacheWrite,
    output: count(u['output_tokens']),
    cacheRead,
    cacheWrite,
    reasoning: count(objectAt(u['output_tokens_details'])?.['thinking_tokens']),
    ttl: split ? { fiveMinutes, oneHour } : undefined,
  });
}

/** Tokens of one modality in Gemini's per-modality lists. */
function modalityTokens(modality: string, ...lists: unknown[]): number {
  let sum = 0;
  for (const list of lists) {
    if (!Array.isArray(list)) continue;
    for (const entry of list)
      if (isObject(entry) && String(entry['modality']).toUpperCase() === modality) sum += count(entry['tokenCount']);
  }
  return sum;
}

/**
 * Gemini usage (Gemini API and Vertex AI). `promptTokenCount` already includes
 * `cachedContentTokenCount`; `thoughtsTokenCount` is OUTSIDE `candidatesTokenCount`, so it is
 * added to the output. Tool-use prompt tokens (`toolUsePromptTokenCount`, outside the prompt
 * count and inside `totalTokenCount`) are input too. Audio and image input come from
 * `promptTokensDetails` (and `toolUsePromptTokensDetails`).
 *
 * @param usageMetadata - the response's `usageMetadata`; for a stream, the last chunk's (each
 *   chunk carries the counts so far).
 * @example
 * ```ts
 * fromGemini({ promptTokenCount: 12000, cachedContentTokenCount: 10000, candidatesTokenCount: 300, thoughtsTokenCount: 700 }).usage;
 * // { inputTokens: 12000, outputTokens: 1000, cacheReadTokens: 10000, reasoningTokens: 700 }
 * ```
 */
export function fromGemini(usageMetadata: GeminiUsageMetadata | null | undefined): NormalizedUsage {
  const m = objectAt(usageMetadata) ?? {};
  const thoughts = count(m['thoughtsTokenCount']);
  return normalized({
    input: count(m['promptTokenCount']) + count(m['toolUsePromptTokenCount']),
    output: count(firstCount(m['candidatesTokenCount'], m['responseTokenCount'])) + thoughts,
    cacheRead: count(m['cachedContentTokenCount']),
    reasoning: thoughts,
    audio: modalityTokens('AUDIO', m['promptTokensDetails'], m['toolUsePromptTokensDetails']),
    image: modalityTokens('IMAGE', m['promptTokensDetails'], m['toolUsePromptTokensDetails']),
  });
}

/** Bedrock's `cacheDetails`, summed by time to live; undefined when no entry names a known one. */
function bedrockTtl(details: unknown): { fiveMinutes?: number; oneHour?: number } | undefined {
  if (!Array.isArray(details)) return undefined;
  const ttl = { fiveMinutes: 0, oneHour: 0 };
  let known = false;
  for (const d of details) {
    if (!isObject(d) || (d['ttl'] !== '1h' && d['ttl'] !== '5m')) continue;
    known = true;
    if (d['ttl'] === '1h') ttl.oneHour += count(d['inputTokens']);
    else ttl.fiveMinutes += count(d['inputTokens']);
  }
  return known ? ttl : undefined;
}

/**
 * Bedrock Converse usage. Bedrock's `inputTokens` EXCLUDES `cacheReadInputTokens` and
 * `cacheWriteInputTokens`; here they are added to it. The writes `cacheDetails` gives the `1h`
 * time to live come back as `cacheWrite1hTokens`.
 *
 * @param usage - the Converse response's `usage`, or the `metadata` event's `usage` of ConverseStream.
 * @example
 * ```ts
 * fromBedrock({ inputTokens: 50, outputTokens: 20, totalTokens: 70, cacheReadInputTokens: 10000, cacheWriteInputTokens: 0 }).usage;
 * // { inputTokens: 10050, outputTokens: 20, cacheReadTokens: 10000 }
 * ```
 */
export function fromBedrock(usage: BedrockUsage | null | undefined): NormalizedUsage {
  const u = objectAt(usage) ?? {};
  const ttl = bedrockTtl(u['cacheDetails']);
  const cacheRead = count(u['cacheReadInputTokens']);
  const cacheWrite = isCount(u['cacheWriteInputTokens'])
    ? count(u['cacheWriteInputTokens'])
    : count(ttl?.fiveMinutes) + count(ttl?.oneHour);
  return normalized({
    input: count(u['inputTokens']) + cacheRead + cacheWrite,
    output: count(u['outputTokens']),
    cacheRead,
    cacheWrite,
    ttl,
  });
}

type Meaning = 'anthropic' | 'bedrock' | 'google' | 'other';

/** Whose meaning a V2 model's numbers have, from its provider id. */
function meaningOf(provider: string): Meaning {
  const p = provider.toLowerCase();
  if (p.includes('anthropic') || p.startsWith('claude')) return 'anthropic';
  if (p.includes('bedrock')) return 'bedrock';
  if (p.startsWith('google') || p.startsWith('vertex') || p.startsWith('gemini')) return 'google';
  return 'other';
}

/** `{ total: { total: … } }` down to the object with the counts (AI SDK 7 wraps V2 models so). */
function innermost(tokens: Json): Json {
  let current = tokens;
  for (let depth = 0; depth < 8 && isObject(current['total']); depth++) current = current['total'] as Json;
  return current;
}

const isV3Shaped = (u: Json): boolean => isObject(u['inputTokens']) || isObject(u['outputTokens']);

/** The split of the cache writes wherever the step carries one. */
function ttlOf(meaning: Meaning, flat: Json, raw: Json | undefined, metadata: Json | undefined): Parts['ttl'] {
  if (isCount(flat['cacheCreationInputTokens5m']) || isCount(flat['cacheCreationInputTokens1h'])) {
    return { fiveMinutes: flat['cacheCreationInputTokens5m'], oneHour: flat['cacheCreationInputTokens1h'] };
  }
  if (meaning === 'anthropic') {
    const anthropic = objectAt(metadata?.['anthropic']);
    const split =
      objectAt(objectAt(anthropic?.['usage'])?.['cache_creation']) ??
      objectAt(raw?.['cache_creation']) ??
      objectAt(anthropic?.['cacheCreation']);
    if (split)
      return {
        fiveMinutes: firstCount(split['ephemeral_5m_input_tokens'], split['ephemeral5mInputTokens']),
        oneHour: firstCount(split['ephemeral_1h_input_tokens'], split['ephemeral1hInputTokens']),
      };
  }
  if (meaning === 'bedrock') {
    return bedrockTtl(objectAt(objectAt(metadata?.['bedrock'])?.['usage'])?.['cacheDetails'] ?? raw?.['cacheDetails']);
  }
  return undefined;
}

/** V3 usage: the totals are Tollgate's meaning; a missing total is the sum of its parts. */
function fromV3(v3: Json, ttl: Parts['ttl']): NormalizedUsage {
  const input = innermost(objectAt(v3['inputTokens']) ?? {});
  const output = innermost(objectAt(v3['outputTokens']) ?? {});
  const cacheRead = count(input['cacheRead']);
  const cacheWrite = count(input['cacheWrite']);
  const reasoning = count(output['reasoning']);
  return normalized({
    input: isCount(input['total']) ? count(input['total']) : count(input['noCache']) + cacheRead + cacheWrite,
    output: isCount(output['total']) ? count(output['total']) : count(output['text']) + reasoning,
    cacheRead,
    cacheWrite,
    reasoning,
    ttl,
  });
}

/**
 * Usage of a step through the AI SDK (and Mastra, which passes the AI SDK's usage on), for any
 * provider behind it.
 *
 * - AI SDK 6 (model spec V3) reports `inputTokens.{total, noCache, cacheRead, cacheWrite}` and
 *   `outputTokens.{total, text, reasoning}`: the totals are Tollgate's meaning already. So are the
 *   totals of an AI SDK 6 result (`inputTokenDetails` / `outputTokenDetails`), and of Mastra's
 *   usage over a V3 model (its `raw` is V3-shaped, and is read instead).
 * - AI SDK 5 (model spec V2) passes each provider's own meaning through `inputTokens` /
 *   `outputTokens` / `cachedInputTokens` / `reasoningTokens`, so `provider` decides:
 *   - `anthropic` (also `vertex.anthropic`): `inputTokens` excludes cache reads
 *     (`cachedInputTokens`) and cache writes, which are only in
 *     `providerMetadata.anthropic.cacheCreationInputTokens`; both are added.
 *   - `bedrock` (`amazon-bedrock`): the same, the writes being in
 *     `providerMetadata.bedrock.usage.cacheWriteInputTokens`.
 *   - `google` (also `google.vertex`): `inputTokens` includes the cached content, but
 *     `outputTokens` excludes the thoughts (`reasoningTokens`), which are added.
 *   - any other (OpenAI and OpenAI-compatible): inclusive, as Tollgate counts. A provider of
 *     unknown meaning whose cache reads and writes are more than its input total evidently
 *     excluded them: they are added rather than cut.
 *
 * The 5-minute / 1-hour split of cache writes is read from Mastra's `cacheCreationInputTokens5m`
 * / `1h`, Anthropic's raw `cache_creation` (in `providerMetadata.anthropic.usage` or the V3
 * `raw`), or Bedrock's `cacheDetails`; its 1-hour part comes back as `cacheWrite1hTokens`.
 *
 * @param usage - the step's usage: a V3 or V2 model's, an AI SDK result's, or Mastra's
 *   (`processOutputStep`'s `usage`, a `finish` chunk's `payload.output.usage`, `steps[i].usage`).
 * @param context - the model's provider id, the step's provider metadata, its spec version.
 * @example
 * ```ts
 * // An Anthropic step through an AI SDK 5 model: 50 uncached and 10,000 cache-read tokens.
 * fromAiSdk({ inputTokens: 50, outputTokens: 20, totalTokens: 70, cachedInputTokens: 10000 }, { provider: 'anthropic.messages', providerMetadata: { anthropic: { cacheCreationInputTokens: 0 } } }).usage;
 * // { inputTokens: 10050, outputTokens: 20, cacheReadTokens: 10000 }
 * ```
 */
export function fromAiSdk(usage: AiSdkUsage | null | undefined, context: AiSdkUsageContext): NormalizedUsage {
  const u: Json = objectAt(usage) ?? {};
  const metadata = objectAt(context.providerMetadata);
  const provider = typeof context.provider === 'string' ? context.provider : '';
  // A step whose model is not known (a processor that only saw its output) is named by its metadata.
  const named =
    provider === '' || provider === 'unknown'
      ? Object.keys(metadata ?? {})
          .map(meaningOf)
          .find((m) => m !== 'other')
      : undefined;
  const meaning = named ?? meaningOf(provider);
  const raw = objectAt(u['raw']);
  if (isV3Shaped(u)) return fromV3(u, ttlOf(meaning, u, raw, metadata));
  if (raw && isV3Shaped(raw)) return fromV3(raw, ttlOf(meaning, u, objectAt(raw['raw']), metadata));

  const ttl = ttlOf(meaning, u, raw, metadata);
  const inputDetails = objectAt(u['inputTokenDetails']);
  const outputDetails = objectAt(u['outputTokenDetails']);
  if (inputDetails || outputDetails || context.specVersion === 'v3') {
    const cacheRead = count(firstCount(inputDetails?.['cacheReadTokens'], u['cachedInputTokens']));
    const cacheWrite = count(firstCount(inputDetails?.['cacheWriteTokens'], u['cacheCreationInputTokens']));
    const reasoning = count(firstCount(outputDetails?.['reasoningTokens'], u['reasoningTokens']));
    return normalized({
      input: isCount(u['inputTokens'])
        ? count(u['inputTokens'])
        : count(inputDetails?.['noCacheTokens']) + cacheRead + cacheWrite,
      output: isCount(u['outputTokens']) ? count(u['outputTokens']) : count(outputDetails?.['textTokens']) + reasoning,
      cacheRead,
      cacheWrite,
      reasoning,
      ttl,
    });
  }

  const input = count(u['inputTokens']);
  const output = count(u['outputTokens']);
  const reasoning = count(u['reasoningTokens']);
  switch (meaning) {
    case 'anthropic': {
      const anthropic = objectAt(metadata?.['anthropic']);
      const rawUsage = objectAt(anthropic?.['usage']);
      const cacheRead = count(
        firstCount(u['cachedInputTokens'], anthropic?.['cacheReadInputTokens'], rawUsage?.['cache_read_input_tokens']),
      );
      const cacheWrite = count(
        firstCount(
          anthropic?.['cacheCreationInputTokens'],
          u['cacheCreationInputTokens'],
          rawUsage?.['cache_creation_input_tokens'],
        ),
      );
      return normalized({ input: input + cacheRead + cacheWrite, output, cacheRead, cacheWrite, reasoning, ttl });
    }
    case 'bedrock': {
      const bedrock = objectAt(objectAt(metadata?.['bedrock'])?.['usage']);
      const cacheRead = count(firstCount(u['cachedInputTokens'], bedrock?.['cacheReadInputTokens']));
      const cacheWrite = count(firstCount(bedrock?.['cacheWriteInputTokens'], u['cacheCreationInputTokens']));
      return normalized({ input: input + cacheRead + cacheWrite, output, cacheRead, cacheWrite, reasoning, ttl });
    }
    case 'google':
      return normalized({
        input,
        output: output + reasoning,
        cacheRead: count(u['cachedInputTokens']),
        reasoning,
        ttl,
      });
    case 'other': {
      const cacheRead = count(u['cachedInputTokens']);
      const cacheWrite = count(u['cacheCreationInputTokens']);
      const excluded = cacheRead + cacheWrite > input;
      return normalized({
        input: excluded ? input + cacheRead + cacheWrite : input,
        output,
        cacheRead,
        cacheWrite,
        reasoning,
        ttl,
      });
    }
  }
}

/**
 * Mastra's usage of a model span (`UsageStats`), or the sums of its token metrics per span, as
 * Tollgate's usage. Mastra means `inputTokens` as the total of its input details and
 * `outputTokens` as the total of its output details, but over an AI SDK 5 model it passes the
 * provider's meaning through (Anthropic and Bedrock steps with cache reads come with an input
 * total that leaves the cache out; Gemini steps with an output total that leaves the thoughts
 * out). Where the parts exceed the total, the total evidently left them out, so they are added
 * to it instead of being cut to fit; where they fit, the total is taken as inclusive (a
 * span's metrics do not say which model spec produced them, so a total that left out smaller
 * parts cannot be told apart).
 *
 * @param stats - the span's `usage` attribute, or the same shape built from its metrics.
 * @example
 * ```ts
 * fromMastraUsageStats({ inputTokens: 50, outputTokens: 20, inputDetails: { cacheRead: 10000 } }).usage;
 * // { inputTokens: 10050, outputTokens: 20, cacheReadTokens: 10000 }
 * ```
 */
export function fromMastraUsageStats(stats: MastraUsageStats | null | undefined): NormalizedUsage {
  const s = objectAt(stats) ?? {};
  const inputDetails = objectAt(s['inputDetails']) ?? {};
  const outputDetails = objectAt(s['outputDetails']) ?? {};
  const input = count(s['inputTokens']);
  const output = count(s['outputTokens']);
  const cacheRead = count(inputDetails['cacheRead']);
  const cacheWrite = isCount(inputDetails['cacheWrite'])
    ? count(inputDetails['cacheWrite'])
    : count(inputDetails['cacheWrite5m']) + count(inputDetails['cacheWrite1h']);
  const reasoning = count(outputDetails['reasoning']);
  return normalized({
    input: cacheRead + cacheWrite > input ? input + cacheRead + cacheWrite : input,
    output: reasoning > output ? output + reasoning : output,
    cacheRead,
    cacheWrite,
    reasoning,
    audio: count(inputDetails['audio']),
    image: count(inputDetails['image']),
    ttl: { fiveMinutes: inputDetails['cacheWrite5m'], oneHour: inputDetails['cacheWrite1h'] },
  });
}
