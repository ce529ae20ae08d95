import type { TiktokenBPE } from 'js-tiktoken/lite';
import type { MessagePartShape, MessageShape, SystemMessageShape } from '../mastra-shapes';
import { BpeCodec } from './bpe';
import { contentVersion } from './content-version';
import { TokenCountCache } from './count-cache';
import { minTextTokens } from './min-text-tokens';
import { o200kRanks } from './o200k';

/**
 * Fixed token overheads of the chat format, in the style of OpenAI's published counting recipe:
 * each message is framed by a few tokens (`<|start|>role<|message|>…<|end|>`), and the reply is
 * primed by a few more. The role name itself is encoded and added on top.
 */
export const TOKENS_PER_MESSAGE = 3;
/** Tokens priming the assistant reply, counted once per request. */
export const TOKENS_PER_CONVERSATION = 3;
/**
 * Framing of a tool call inside an assistant message, and of a tool result, which providers
 * send as a separate `tool` message.
 */
export const TOKENS_PER_TOOL_CALL = 3;
/** Framing of one tool result (its own `tool` message at the provider). */
export const TOKENS_PER_TOOL_RESULT = TOKENS_PER_MESSAGE + 1;
/**
 * Estimate for one image. Providers bill images by resolution, not by the length of their
 * base64 text, which would overcount a 100 kB image by ~25,000 tokens.
 */
export const DEFAULT_IMAGE_TOKENS = 765;
/** Estimate for one non-image file (a PDF page or a short document). */
export const DEFAULT_FILE_TOKENS = 1_500;

/** A part of a provider prompt message (AI SDK `LanguageModelV2/V3Prompt`): the fields counted. */
export interface PromptPartShape {
  type: string;
  text?: string;
  toolCallId?: string;
  toolName?: string;
  /** A tool call's arguments: JSON text or a value. */
  input?: unknown;
  /** A tool result: `{ type: 'text' | 'json' | 'error-text' | 'error-json' | 'content' | 'execution-denied', value?, reason? }`. */
  output?: unknown;
  mediaType?: string;
}

/** A provider prompt message, as `processLLMRequest` receives it. */
export interface PromptMessageShape {
  role: string;
  content: string | ReadonlyArray<PromptPartShape>;
}

/** What the count cache holds for a message: its count, if cached, and its content version. */
export interface CountLookup {
  tokens: number | undefined;
  /** Undefined when not taken: no cache, no id, or nothing cached for the id. */
  version: number | undefined;
}

/** Options for {@link MessageTokenCounter}. */
export interface MessageTokenCounterOptions {
  /** BPE rank set from `js-tiktoken/ranks/*`. Defaults to `o200k_base`. */
  encoding?: TiktokenBPE;
  /**
   * Count cache shared across steps and runs. Pass a {@link TokenCountCache} to share one between
   * processors, or `false` to re-encode every message every time (slow; for comparison only).
   */
  cache?: TokenCountCache | false;
  /** Tokens counted for each image instead of its encoded bytes. Default {@link DEFAULT_IMAGE_TOKENS}. */
  imageTokens?: number;
  /** Tokens counted for each non-image file. Default {@link DEFAULT_FILE_TOKENS}. */
  fileTokens?: number;
}

let defaultEncoder: BpeCodec | undefined;
const encoders = new WeakMap<TiktokenBPE, BpeCodec>();
/**
 * One codec per rank set: building one indexes the whole rank set (200,000 tokens for o200k).
 * The default, o200k_base, comes from the table shipped with the package (see {@link o200kRanks}).
 */
function encoderFor(ranks: TiktokenBPE | undefined): BpeCodec {
  if (!ranks) return (defaultEncoder ??= new BpeCodec(o200kRanks()));
  let encoder = encoders.get(ranks);
  if (!encoder) {
    encoder = new BpeCodec(ranks);
    encoders.set(ranks, encoder);
  }
  return encoder;
}

/**
 * Counts the tokens a message costs with an exact BPE encoding plus fixed framing overheads.
 *
 * What is counted: the role, text and reasoning parts, each tool call's name and arguments (JSON),
 * each tool result (text, or JSON), and a fixed estimate per image or file. Step markers, sources
 * and `data-*` parts are not sent to the model and cost nothing.
 *
 * Counts are cached by message id and a content version (see {@link contentVersion}), so a long
 * multi-step run encodes each message once, not once per step.
 */
export class MessageTokenCounter {
  private readonly encoder: BpeCodec;
  private readonly cache: TokenCountCache | undefined;
  private readonly imageTokens: number;
  private readonly fileTokens: number;
  private readonly roleTokens = new Map<string, number>();
  private readonly serialized = new WeakMap<object, string>();
  /** {@link serialize}, bound once: the content version samples payloads through it. */
  private readonly serializeValue = (value: unknown): string => this.serialize(value);
  private readonly textMemo = new Map<string, number>();
  private textMemoChars = 0;
  /** Strings passed to the BPE encoder since construction; lets tests prove counting is not quadratic. */
  encodedStrings = 0;

  constructor(options: MessageTokenCounterOptions = {}) {
    this.encoder = encoderFor(options.encoding);
    this.cache = options.cache === false ? undefined : (options.cache ?? new TokenCountCache());
    this.imageTokens = options.imageTokens ?? DEFAULT_IMAGE_TOKENS;
    this.fileTokens = options.fileTokens ?? DEFAULT_FILE_TOKENS;
  }

  /** Exact BPE token count of `text`. Special-token strings such as `<|endoftext|>` count as plain text. */
  countText(text: string): number {
    if (text.length === 0) return 0;
    this.encodedStrings++;
    return this.encoder.count(text);
  }

  /** BPE tokens of `text`, for truncation. */
  encode(text: string): number[] {
    return this.encoder.encode(text);
  }

  /** Text of `tokens`. */
  decode(tokens: number[]): string {
    return this.encoder.decode(tokens);
  }

  /** Tokens one stored message costs, framing included. Cached by id and content version. */
  countMessage(message: MessageShape): number {
    return this.countKnown(message, this.lookup(message));
  }

  /**
   * The cached count of `message`, if any, without counting it; pass the result to {@link countKnown}.
   * A message whose id was never counted costs one map lookup: its content version is taken only
   * when it is counted.
   */
  lookup(message: MessageShape): CountLookup {
    if (!this.cache || !message.id || !this.cache.has(message.id)) return { tokens: undefined, version: undefined };
    const version = contentVersion(message, this.serializeValue);
    return { tokens: this.cache.get(message.id, version), version };
  }

  /** {@link countMessage} after a {@link lookup}: counts (and caches) only on a miss. */
  countKnown(message: MessageShape, known: CountLookup): number {
    if (known.tokens !== undefined) return known.tokens;
    if (!this.cache || !message.id) return this.countUncached(message);
    const version = known.version ?? contentVersion(message, this.serializeValue);
    const cached = this.cache.get(message.id, version);
    if (cached !== undefined) return cached;
    const tokens = this.countUncached(message);
    this.cache.set(message.id, version, tokens);
    return tokens;
  }

  /**
   * Tokens one provider prompt message costs, counted as {@link countMessage} counts the stored
   * message it came from: a stored tool invocation becomes an assistant `tool-call` part plus a
   * `tool` message with its `tool-result`, and the two add up to the invocation's count (a tool
   * message has no framing of its own beyond {@link TOKENS_PER_TOOL_RESULT} per result). Long
   * texts are memoized by value, as prompt messages are rebuilt at every step.
   */
  countPromptMessage(message: PromptMessageShape): number {
    return this.promptCost(
      message,
      (t) => this.countTextMemo(t),
      (v) => this.countPayload(v),
    );
  }

  /** A lower bound of {@link countPromptMessage}, without encoding (see {@link minTokens}). */
  minPromptTokens(message: PromptMessageShape): number {
    return this.promptCost(message, minTextTokens, (v) => this.minPayloadTokens(v));
  }

  private promptCost(
    message: PromptMessageShape,
    text: (t: string) => number,
    payload: (v: unknown) => number,
  ): number {
    const content = message.content;
    const framed = message.role !== 'tool';
    let tokens = framed ? TOKENS_PER_MESSAGE + this.countRole(message.role) : 0;
    if (typeof content === 'string') return tokens + text(content);
    if (!Array.isArray(content)) return tokens;
    for (const part of content as ReadonlyArray<PromptPartShape>) {
      switch (part.type) {
        case 'text':
        case 'reasoning':
          tokens += text(part.text ?? '');
          break;
        case 'tool-call':
          tokens += TOKENS_PER_TOOL_CALL + text(part.toolName ?? '') + payload(part.input);
          break;
        case 'tool-result':
          tokens += TOKENS_PER_TOOL_RESULT + this.outputCost(part.output, text, payload);
          break;
        case 'file':
        case 'image':
          tokens +=
            (part.mediaType ?? '').startsWith('image/') || part.type === 'image' ? this.imageTokens : this.fileTokens;
          break;
        default:
          break;
      }
    }
    return tokens;
  }

  /** A prompt tool result: as the stored result it was converted from would count. */
  private outputCost(output: unknown, text: (t: string) => number, payload: (v: unknown) => number): number {
    if (!output || typeof output !== 'object') return payload(output);
    const o = output as { type?: string; value?: unknown; reason?: string };
    switch (o.type) {
      case 'text':
      case 'error-text':
        return typeof o.value === 'string' ? text(o.value) : payload(o.value);
      case 'json':
      case 'error-json':
        return payload(o.value);
      case 'execution-denied':
        return text(o.reason ?? '');
      case 'content': {
        if (!Array.isArray(o.value)) return 0;
        let tokens = 0;
        for (const entry of o.value as Array<{ type?: string; text?: string; mediaType?: string }>) {
          if (entry?.type === 'text' && typeof entry.text === 'string') tokens += text(entry.text);
          else if (typeof entry?.mediaType === 'string')
            tokens += entry.mediaType.startsWith('image/') ? this.imageTokens : this.fileTokens;
          else tokens += payload(entry);
        }
        return tokens;
      }
      default:
        return payload(o.value ?? output);
    }
  }

  private countTextMemo(text: string): number {
    if (text.length < 256) return this.countText(text);
    let tokens = this.textMemo.get(text);
    if (tokens === undefined) {
      tokens = this.countText(text);
      if (this.textMemoChars + text.length > 16_000_000) {
        this.textMemo.clear();
        this.textMemoChars = 0;
      }
      this.textMemo.set(text, tokens);
      this.textMemoChars += text.length;
    }
    return tokens;
  }

  /**
   * A lower bound of {@link countMessage}, without encoding: framing and fixed estimates as
   * counted, and for text one token per word (see {@link minTextTokens}). Lets the limiter rule
   * out a message that cannot fit without counting it exactly.
   */
  minTokens(message: MessageShape): number {
    let tokens = TOKENS_PER_MESSAGE + this.countRole(message.role);
    const parts = message.content?.parts;
    if (parts && parts.length > 0) {
      for (const part of parts) {
        switch (part.type) {
          case 'text':
            tokens += minTextTokens(part.text ?? '');
            break;
          case 'reasoning':
            tokens += minTextTokens(part.reasoning ?? '');
            for (const detail of part.details ?? [])
              if (typeof detail.text === 'string') tokens += minTextTokens(detail.text);
            break;
          case 'tool-invocation': {
            const invocation = part.toolInvocation;
            if (!invocation) break;
            tokens +=
              TOKENS_PER_TOOL_CALL + minTextTokens(invocation.toolName ?? '') + this.minPayloadTokens(invocation.args);
            if (invocation.state === 'result')
              tokens += TOKENS_PER_TOOL_RESULT + this.minPayloadTokens(invocation.result);
            break;
          }
          default:
            tokens += this.countPart(part);
        }
      }
    } else if (typeof message.content?.content === 'string') {
      tokens += minTextTokens(message.content.content);
    }
    for (const attachment of message.content?.experimental_attachments ?? []) {
      tokens += attachment.contentType?.startsWith('image/') ? this.imageTokens : this.fileTokens;
    }
    return tokens;
  }

  /** The least any stored message costs: its framing and a one-token role. */
  get minMessageTokens(): number {
    return TOKENS_PER_MESSAGE + 1;
  }

  /** Tokens one system message costs (`getAllSystemMessages()` shape: string or text-part content). */
  countSystemMessage(message: SystemMessageShape): number {
    const content = message.content;
    let tokens = TOKENS_PER_MESSAGE + this.countRole(message.role || 'system');
    if (typeof content === 'string') return tokens + this.countText(content);
    if (Array.isArray(content)) {
      for (const part of content as Array<{ type?: string; text?: string }>) {
        if (typeof part?.text === 'string') tokens += this.countText(part.text);
      }
    }
    return tokens;
  }

  private countRole(role: string): number {
    let tokens = this.roleTokens.get(role);
    if (tokens === undefined) {
      tokens = this.countText(role);
      this.roleTokens.set(role, tokens);
    }
    return tokens;
  }

  private countUncached(message: MessageShape): number {
    let tokens = TOKENS_PER_MESSAGE + this.countRole(message.role);
    const parts = message.content?.parts;
    if (parts && parts.length > 0) {
      for (const part of parts) tokens += this.countPart(part);
    } else if (typeof message.content?.content === 'string') {
      tokens += this.countText(message.content.content);
    }
    for (const attachment of message.content?.experimental_attachments ?? []) {
      tokens += attachment.contentType?.startsWith('image/') ? this.imageTokens : this.fileTokens;
    }
    return tokens;
  }

  private countPart(part: MessagePartShape): number {
    switch (part.type) {
      case 'text':
        return this.countText(part.text ?? '');
      case 'reasoning': {
        // Counted although some providers drop replayed reasoning: overcounting keeps the limit safe.
        let tokens = this.countText(part.reasoning ?? '');
        for (const detail of part.details ?? [])
          if (typeof detail.text === 'string') tokens += this.countText(detail.text);
        return tokens;
      }
      case 'tool-invocation': {
        const invocation = part.toolInvocation;
        if (!invocation) return 0;
        // A result-state invocation stands for both the call and its result: both reach the model.
        let tokens =
          TOKENS_PER_TOOL_CALL + this.countText(invocation.toolName ?? '') + this.countPayload(invocation.args);
        if (invocation.state === 'result') tokens += TOKENS_PER_TOOL_RESULT + this.countPayload(invocation.result);
        return tokens;
      }
      case 'file':
        return (part.mediaType ?? part.mimeType ?? '').startsWith('image/') ? this.imageTokens : this.fileTokens;
      case 'image':
        return this.imageTokens;
      default:
        // step-start, source, source-url, source-document, error, data-*: never sent to the model.
        return 0;
    }
  }

  /** Tool arguments and results: text as is, media as a fixed estimate, anything else as JSON. */
  private countPayload(value: unknown): number {
    if (value === undefined || value === null) return 0;
    if (typeof value === 'string') return this.countText(value);
    const media = this.mediaEstimate(value);
    if (media !== undefined) return media;
    return this.countText(this.serialize(value));
  }

  /**
   * Media inside tool results: `{ data, mediaType | mimeType }`, arrays of those, and the AI SDK
   * `{ type: 'content', value: [...] }` output. Text entries are still counted exactly.
   */
  private mediaEstimate(value: unknown): number | undefined {
    const isMedia = (v: unknown): v is { mediaType?: string; mimeType?: string } =>
      !!v &&
      typeof v === 'object' &&
      typeof (v as { data?: unknown }).data === 'string' &&
      (typeof (v as { mediaType?: unknown }).mediaType === 'string' ||
        typeof (v as { mimeType?: unknown }).mimeType === 'string');
    const estimate = (v: { mediaType?: string; mimeType?: string }) =>
      (v.mediaType ?? v.mimeType ?? '').startsWith('image/') ? this.imageTokens : this.fileTokens;
    if (isMedia(value)) return estimate(value);
    const entries = Array.isArray(value)
      ? value
      : (value as { type?: unknown; value?: unknown }).type === 'content' &&
          Array.isArray((value as { value?: unknown }).value)
        ? (value as { value: unknown[] }).value
        : undefined;
    if (!entries || entries.length === 0 || !entries.some(isMedia)) return undefined;
    let tokens = 0;
    for (const entry of entries) {
      if (isMedia(entry)) tokens += estimate(entry);
      else if (entry && typeof (entry as { text?: unknown }).text === 'string')
        tokens += this.countText((entry as { text: string }).text);
      else tokens += this.countText(this.serialize(entry));
    }
    return tokens;
  }

  private minPayloadTokens(value: unknown): number {
    if (value === undefined || value === null) return 0;
    if (typeof value === 'string') return minTextTokens(value);
    // Media are counted at a fixed estimate, whatever their JSON: 0 is the safe bound.
    if (this.mediaEstimate(value) !== undefined) return 0;
    return minTextTokens(this.serialize(value));
  }

  private serialize(value: unknown): string {
    if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? '';
    let text = this.serialized.get(value);
    if (text === undefined) {
      text = JSON.stringify(value) ?? '';
      this.serialized.set(value, text);
    }
    return text;
  }
}
