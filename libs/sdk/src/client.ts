import { systemClock, type Clock } from './clock';
import { TollgateError } from './errors';
import {
  EventBuffer,
  type DroppedEvents,
  type EventStats,
  type FlushResult,
  type RejectedEvent,
} from './events/event-buffer';
import { prepareEvent, type RecordStepEvent } from './events/prepare-event';
import { GuardApi, type GuardOptions } from './guard';
import { HttpTransport, type FetchLike } from './http';
import { MetricsApi } from './metrics';
import { pooledFetch } from './pooled-fetch';

/** Settings of {@link TollgateClient}; only `baseUrl` and `apiKey` are required. */
export interface TollgateClientOptions {
  /** The service, e.g. `http://127.0.0.1:3000`. */
  baseUrl: string;
  /** A project API key with the scopes the calls need (ingest, guard, read). */
  apiKey: string;
  /** Per attempt, for event and metric calls. Default 10 000 ms. */
  timeoutMs?: number;
  /** Further attempts per request on network errors, timeouts, 429 and 5xx (never on other 4xx). Default 3. */
  retries?: number;
  /** First backoff step, doubled per attempt, with jitter. Default 100 ms. */
  minRetryDelayMs?: number;
  /** Largest backoff step. Default 5000 ms. */
  maxRetryDelayMs?: number;
  /**
   * How requests are sent. Default: Node's `http`/`https` over a keep-alive connection pool (see
   * `pooledFetch`), so that calls after the first skip the connection set-up. Pass
   * `globalThis.fetch` (or a proxy-aware fetch, a test double) to use that instead.
   */
  fetch?: FetchLike;
  /** Events per request (at most 1000). Default 500. */
  maxBatchSize?: number;
  /** JSON bytes per request. Default 512 KiB. */
  maxBatchBytes?: number;
  /** Longest wait for a batch to fill. Default 1000 ms. */
  flushIntervalMs?: number;
  /** Most events held in memory; past it new events are dropped (see `onDrop`). Default 10 000. */
  maxBufferSize?: number;
  /** Event requests in flight at once. Default 2. */
  concurrency?: number;
  /** Events dropped: buffer full, shutdown deadline, or a batch refused for good. */
  onDrop?: (drop: DroppedEvents) => void;
  /** One event refused by the service (invalid there); never retried. */
  onRejected?: (rejection: RejectedEvent) => void;
  /** A request failed and will be tried again. */
  onRetry?: (error: TollgateError, attempt: number) => void;
  /**
   * Guard calls: timeout per attempt (default 5000 ms), retries on network errors, timeouts, 429
   * and 5xx (default 1), and how long busy answers are retried (`busyDeadlineMs`, default
   * 10 000 ms; see {@link GuardOptions.busyDeadlineMs}).
   */
  guard?: { timeoutMs?: number; retries?: number; busyDeadlineMs?: number };
  /** Time source; tests pass a fake one. */
  clock?: Clock;
  /** Uniform random in [0, 1) for jitter; tests pass a fixed one. */
  random?: () => number;
  /** Event id generator. Default `crypto.randomUUID`. */
  generateId?: () => string;
}

/** `client.events`: buffered, batched, retried recording of step events. */
export interface EventsApi {
  /**
   * Validates `event` against the service's schema, fills `eventId` and `occurredAt`, and
   * buffers it; returns the event id. Never waits for the network.
   *
   * @throws {@link TollgateError} `validation_failed` with the `field` to fix.
   */
  record(event: RecordStepEvent): string;
  /**
   * Resolves once every event recorded before the call is stored, rejected or dropped, with what
   * became of the events recorded since the previous `flush()`: how many were delivered, rejected
   * and dropped, and the error that dropped them (a wrong or revoked key: `unauthorized`).
   */
  flush(): Promise<FlushResult>;
  /** Counters since the client was made. */
  readonly stats: EventStats;
}

function positiveInt(name: string, value: number | undefined, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0 || value > max) {
    throw new TollgateError(
      `TollgateClient option ${name} must be an integer between 0 and ${max}, got ${String(value)}`,
      { code: 'validation_failed', field: name },
    );
  }
  return value;
}

/**
 * The Tollgate client. Make one per process and share it.
 *
 * @example
 * ```ts
 * const tollgate = new TollgateClient({ baseUrl: 'http://127.0.0.1:3000', apiKey: process.env.TOLLGATE_KEY! });
 * tollgate.events.record({ traceId, entityType: 'agent', provider: 'openai', model: 'gpt-4o', usage: { inputTokens: 812, outputTokens: 64 } });
 * await tollgate.shutdown();
 * ```
 */
export class TollgateClient {
  /** Recording step events. */
  readonly events: EventsApi;
  /** Budget checks before a step, and reservation release. */
  readonly guard: GuardApi;
  /** Metric queries and discovery. */
  readonly metrics: MetricsApi;
  private readonly buffer: EventBuffer;
  private readonly errorListeners = new Set<(error: TollgateError) => void>();

  constructor(options: TollgateClientOptions) {
    if (!options || typeof options.baseUrl !== 'string' || !/^https?:\/\//.test(options.baseUrl)) {
      throw new TollgateError('TollgateClient needs baseUrl, an http(s) URL such as http://127.0.0.1:3000', {
        code: 'validation_failed',
        field: 'baseUrl',
      });
    }
    if (typeof options.apiKey !== 'string' || options.apiKey.length === 0) {
      throw new TollgateError('TollgateClient needs apiKey, a project API key', {
        code: 'validation_failed',
        field: 'apiKey',
      });
    }
    if (options.fetch !== undefined && typeof options.fetch !== 'function') {
      throw new TollgateError('TollgateClient option fetch must be a function such as globalThis.fetch', {
        code: 'validation_failed',
        field: 'fetch',
      });
    }
    const fetchImpl = options.fetch ?? pooledFetch();
    const clock = options.clock ?? systemClock;
    const random = options.random ?? Math.random;
    const generateId = options.generateId ?? (() => globalThis.crypto.randomUUID());
    const retry = {
      retries: positiveInt('retries', options.retries, 3, 100),
      minDelayMs: positiveInt('minRetryDelayMs', options.minRetryDelayMs, 100),
      maxDelayMs: positiveInt('maxRetryDelayMs', options.maxRetryDelayMs, 5000),
      maxRetryAfterMs: 60_000,
    };
    const transport = new HttpTransport({
      baseUrl: options.baseUrl.replace(/\/+$/, ''),
      apiKey: options.apiKey,
      timeoutMs: positiveInt('timeoutMs', options.timeoutMs, 10_000),
      retry,
      fetch: fetchImpl,
      clock,
      random,
    });
    this.buffer = new EventBuffer(transport, clock, random, retry, {
      maxBatchSize: Math.max(1, positiveInt('maxBatchSize', options.maxBatchSize, 500, 1000)),
      maxBatchBytes: Math.max(1, positiveInt('maxBatchBytes', options.maxBatchBytes, 512 * 1024)),
      flushIntervalMs: positiveInt('flushIntervalMs', options.flushIntervalMs, 1000),
      maxBufferSize: Math.max(1, positiveInt('maxBufferSize', options.maxBufferSize, 10_000)),
      concurrency: Math.max(1, positiveInt('concurrency', options.concurrency, 2, 64)),
      onDrop: options.onDrop,
      onRejected: options.onRejected,
      onRetry: options.onRetry,
      onAuthError: (error, dropped) => this.reportError(error, dropped),
    });
    const buffer = this.buffer;
    this.events = {
      record: (event) => {
        const prepared = prepareEvent(event, clock.now(), generateId);
        buffer.add(prepared);
        return prepared.eventId;
      },
      flush: () => buffer.flush(),
      get stats() {
        return buffer.stats;
      },
    };
    this.guard = new GuardApi(
      transport,
      clock,
      {
        // Above the service's own bound on a check (a wait in its scope's queue, GUARD_QUEUE_WAIT_MS,
        // 1000 ms by default, then GUARD_TIMEOUT_MS, 2000 ms, of database work; past them it answers
        // busy or applies failMode itself). A client that gave up at 2000 ms would throw away
        // answers already on their way, apply its failMode to them, and queue one more check on a
        // scope that is already loaded.
        timeoutMs: positiveInt('guard.timeoutMs', options.guard?.timeoutMs, 5000),
        retries: positiveInt('guard.retries', options.guard?.retries, 1, 100),
        busyDeadlineMs: positiveInt('guard.busyDeadlineMs', options.guard?.busyDeadlineMs, 10_000),
      },
      random,
    );
    this.metrics = new MetricsApi(transport);
  }

  /** Same as `events.flush()`. */
  flush(): Promise<FlushResult> {
    return this.buffer.flush();
  }

  /**
   * Stops taking events, delivers what is buffered for up to `timeoutMs` (default 10 s), drops
   * the rest through `onDrop` (reason `shutdown`) and stops every timer, so the process can exit.
   * Resolves with what became of the events recorded since the last `flush()` (see {@link FlushResult}).
   */
  shutdown(options: { timeoutMs?: number } = {}): Promise<FlushResult> {
    return this.buffer.shutdown(options.timeoutMs ?? 10_000);
  }

  /**
   * `error`: the service refused the client's events for good because of its key (the first 401
   * or 403: a wrong, revoked or under-scoped key). Without a listener, the client says so once
   * with `console.warn`; events are never dropped silently. Returns the client.
   */
  on(event: 'error', listener: (error: TollgateError) => void): this {
    if (event !== 'error')
      throw new TollgateError(`TollgateClient has no event ${String(event)}; the one event is error`, {
        code: 'validation_failed',
        field: 'event',
      });
    this.errorListeners.add(listener);
    return this;
  }

  /** Removes a listener added with {@link on}. */
  off(event: 'error', listener: (error: TollgateError) => void): this {
    if (event === 'error') this.errorListeners.delete(listener);
    return this;
  }

  private reportError(error: TollgateError, dropped: number): void {
    if (this.errorListeners.size === 0) {
      console.warn(
        `[tollgate] ${error.message}. ${dropped} event(s) dropped, and every later batch will be too until the key is fixed. Listen with client.on('error', …) to handle this yourself.`,
      );
      return;
    }
    for (const listener of this.errorListeners) {
      try {
        listener(error);
      } catch {
        /* a listener's failure must not stop the others */
      }
    }
  }
}
