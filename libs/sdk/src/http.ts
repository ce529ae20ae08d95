import { sleep, type Clock } from './clock';
import { TollgateError, type TollgateErrorCode } from './errors';

/** The subset of `fetch` the client uses; pass your own (a proxy agent, a test double). */
export type FetchLike = (
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal },
) => Promise<{
  ok: boolean;
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}>;

/** How failed requests are retried. */
export interface RetryPolicy {
  /** Further attempts after the first one, for network errors, timeouts, 429 and 5xx. */
  retries: number;
  /** First backoff step; doubles on each attempt. */
  minDelayMs: number;
  /** Largest backoff step (a `Retry-After` from the service may ask for longer, up to `maxRetryAfterMs`). */
  maxDelayMs: number;
  /** Upper bound on how long a `Retry-After` is honoured. */
  maxRetryAfterMs: number;
}

/** Settings of {@link HttpTransport}. */
export interface TransportOptions {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  retry: RetryPolicy;
  fetch: FetchLike;
  clock: Clock;
  /** Uniform in [0, 1); injectable so backoff is deterministic in tests. */
  random: () => number;
}

/** One request to the service. */
export interface RequestSpec {
  method: 'GET' | 'POST';
  path: string;
  /** A JSON string (already serialized) or a value to serialize. */
  body?: string | unknown;
  query?: Record<string, string | number | undefined>;
  timeoutMs?: number;
  retries?: number;
  /** Keep the process alive while waiting to retry (someone awaits the outcome). */
  keepAlive?: () => boolean;
  /** Called before each retry, with the error that caused it. */
  onRetry?: (error: TollgateError, attempt: number, delayMs: number) => void;
}

/**
 * Backoff before retry number `attempt` (0-based): exponential with "equal jitter" (half fixed,
 * half random, so concurrent clients spread out but never retry instantly), and at least what
 * the service asked for with `Retry-After`.
 */
export function backoffDelay(
  attempt: number,
  policy: RetryPolicy,
  random: () => number,
  retryAfterSeconds?: number,
): number {
  const step = Math.min(policy.maxDelayMs, policy.minDelayMs * 2 ** attempt);
  const jittered = step / 2 + random() * (step / 2);
  if (retryAfterSeconds === undefined) return Math.round(jittered);
  return Math.round(Math.min(policy.maxRetryAfterMs, Math.max(jittered, retryAfterSeconds * 1000)));
}

/** `Retry-After` as seconds: either a number of seconds or an HTTP date. */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - nowMs) / 1000);
}

const HINTS: Record<string, string> = {
  unauthorized: 'check the apiKey given to TollgateClient',
  forbidden: 'the API key lacks the scope this call needs (ingest, guard or read)',
  not_found: 'check baseUrl, and that the service version has this route',
  payload_too_large: 'lower maxBatchBytes',
};

/** JSON over HTTP with bearer auth, a timeout per attempt and retries with backoff. */
export class HttpTransport {
  constructor(private readonly options: TransportOptions) {}

  /** The service's base URL without a trailing slash. */
  get baseUrl(): string {
    return this.options.baseUrl;
  }

  /** Sends `spec`, retrying what may succeed later; throws a {@link TollgateError} otherwise. */
  async request<T>(spec: RequestSpec): Promise<T> {
    const retries = spec.retries ?? this.options.retry.retries;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(spec);
      } catch (err) {
        const error = err as TollgateError;
        if (!(error instanceof TollgateError) || !error.retryable || attempt >= retries) throw error;
        const delay = backoffDelay(attempt, this.options.retry, this.options.random, error.retryAfterSeconds);
        spec.onRetry?.(error, attempt + 1, delay);
        await sleep(this.options.clock, delay, spec.keepAlive?.() ?? true);
      }
    }
  }

  private url(spec: RequestSpec): string {
    let url = this.options.baseUrl + spec.path;
    const params = Object.entries(spec.query ?? {}).filter(([, v]) => v !== undefined);
    if (params.length)
      url += '?' + new URLSearchParams(params.map(([k, v]): [string, string] => [k, String(v)])).toString();
    return url;
  }

  private async once<T>(spec: RequestSpec): Promise<T> {
    const { clock } = this.options;
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.options.apiKey}`,
      accept: 'application/json',
    };
    let body: string | undefined;
    if (spec.body !== undefined) {
      body = typeof spec.body === 'string' ? spec.body : JSON.stringify(spec.body);
      headers['content-type'] = 'application/json';
    }
    const timeoutMs = spec.timeoutMs ?? this.options.timeoutMs;
    const controller = new AbortController();
    let timedOut = false;
    const timer = clock.setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    let status: number;
    let text: string;
    let retryAfter: string | null;
    try {
      const res = await this.options.fetch(this.url(spec), {
        method: spec.method,
        headers,
        body,
        signal: controller.signal,
      });
      status = res.status;
      retryAfter = res.headers.get('retry-after');
      text = await res.text();
    } catch (cause) {
      if (timedOut)
        throw new TollgateError(`Tollgate did not answer ${spec.method} ${spec.path} within ${timeoutMs} ms`, {
          code: 'timeout',
          cause,
        });
      throw new TollgateError(`Could not reach Tollgate at ${this.options.baseUrl} (${describe(cause)})`, {
        code: 'network_error',
        cause,
      });
    } finally {
      clock.clearTimeout(timer);
    }
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (status >= 200 && status < 300) {
      if (json === undefined && text)
        throw new TollgateError(`Tollgate answered ${spec.method} ${spec.path} with something other than JSON`, {
          code: 'bad_response',
          status,
        });
      return json as T;
    }
    throw errorFromResponse(spec, status, json, parseRetryAfter(retryAfter, clock.now()));
  }
}

function describe(cause: unknown): string {
  const c = cause as { message?: string; cause?: { code?: string; message?: string } };
  return c?.cause?.code ?? c?.cause?.message ?? c?.message ?? String(cause);
}

/** The service answers errors as `{ statusCode, code, message, field? }`. */
function errorFromResponse(
  spec: RequestSpec,
  status: number,
  json: unknown,
  retryAfterSeconds: number | undefined,
): TollgateError {
  const body = (json && typeof json === 'object' ? json : {}) as { code?: string; message?: string; field?: string };
  const code: TollgateErrorCode =
    body.code ??
    (status === 429 ? 'rate_limited' : status === 404 ? 'not_found' : status >= 500 ? 'unavailable' : 'bad_response');
  const what = body.message ?? `HTTP ${status}`;
  const hint = HINTS[code] ? `; ${HINTS[code]}` : '';
  return new TollgateError(`${spec.method} ${spec.path} failed with ${status} ${code}: ${what}${hint}`, {
    code,
    status,
    field: body.field,
    retryAfterSeconds,
  });
}
