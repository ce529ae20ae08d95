import type { IngestResponse, StepUsageEvent } from '../../../contracts/src/step-event';
import type { Clock, TimerHandle } from '../clock';
import { TollgateError } from '../errors';
import { backoffDelay, type HttpTransport, type RetryPolicy } from '../http';
import type { PreparedEvent } from './prepare-event';

/** Why events left the buffer without being stored. */
export type DropReason =
  /** `maxBufferSize` events were already held: the new event was not taken. */
  | 'buffer_full'
  /** `shutdown()` reached its deadline with these events still undelivered. */
  | 'shutdown'
  /** Recorded after `shutdown()`. */
  | 'closed'
  /** The service refused the whole batch with an error a retry cannot fix (bad API key, …). */
  | 'unrecoverable';

/** What `onDrop` receives. */
export interface DroppedEvents {
  reason: DropReason;
  /** The events, as they would have been sent. */
  events: StepUsageEvent[];
  /** The error, for `unrecoverable`. */
  error?: TollgateError;
}

/** What `onRejected` receives: the service refused this one event (never retried). */
export interface RejectedEvent {
  event: StepUsageEvent;
  eventId: string | null;
  /** The field to fix, e.g. `events[3].occurredAt`. */
  field: string;
  reason: string;
}

/** Buffering settings of `client.events` (all optional on {@link TollgateClientOptions}). */
export interface EventBufferOptions {
  /** Events per request; the service takes at most 1000. Default 500. */
  maxBatchSize: number;
  /** Bytes of JSON per request; the service takes 1 MiB by default. Default 512 KiB. */
  maxBatchBytes: number;
  /** Longest time an event waits for a batch to fill. Default 1000 ms. */
  flushIntervalMs: number;
  /** Most events held at once (queued, waiting for a retry or in flight); past it new events are dropped. Default 10 000. */
  maxBufferSize: number;
  /** Requests in flight at once. Default 2. */
  concurrency: number;
  /** Called when events are dropped (also counted in `stats.dropped`). */
  onDrop?: (drop: DroppedEvents) => void;
  /** Called for each event the service rejected (also counted in `stats.rejected`). */
  onRejected?: (rejection: RejectedEvent) => void;
  /** Called when a batch could not be delivered yet and will be tried again. */
  onRetry?: (error: TollgateError, attempt: number) => void;
  /** Called once, for the first batch the service refused with 401 or 403 (a wrong, revoked or under-scoped key). */
  onAuthError?: (error: TollgateError, dropped: number) => void;
}

/**
 * What `flush()` resolves with: the outcome of the events recorded since the previous `flush()`
 * call (or since the client was made), each counted once.
 */
export interface FlushResult {
  /** Stored by the service: `accepted + duplicates`. */
  delivered: number;
  /** Stored now. */
  accepted: number;
  /** Already stored (a retried batch); not counted twice. */
  duplicates: number;
  /** Refused one by one as invalid (see `onRejected`); never retried. */
  rejected: number;
  /** Not stored: the buffer was full, `shutdown()` reached its deadline, or the service refused the batch (a bad key). */
  dropped: number;
  /** Dropped events by reason. */
  droppedBy: Partial<Record<DropReason, number>>;
  /** Only from `shutdown()`: sent, and still unanswered when its deadline came (their outcome is unknown). */
  pending: number;
  /** True when every event was delivered. */
  ok: boolean;
  /** The first error that made events undeliverable (for example `unauthorized`, 401). */
  error?: TollgateError;
}

interface Tally {
  /** Sequence numbers `from`…`to` belong to this tally. */
  from: number;
  to: number;
  accepted: number;
  duplicates: number;
  rejected: number;
  dropped: number;
  droppedBy: Partial<Record<DropReason, number>>;
  error?: TollgateError;
}

const newTally = (from: number): Tally => ({
  from,
  to: Infinity,
  accepted: 0,
  duplicates: 0,
  rejected: 0,
  dropped: 0,
  droppedBy: {},
});

function resultOf(t: Tally, pending = 0): FlushResult {
  const delivered = t.accepted + t.duplicates;
  return {
    pending,
    delivered,
    accepted: t.accepted,
    duplicates: t.duplicates,
    rejected: t.rejected,
    dropped: t.dropped,
    droppedBy: t.droppedBy,
    ok: t.rejected === 0 && t.dropped === 0 && pending === 0,
    ...(t.error ? { error: t.error } : {}),
  };
}

/** Counters of `client.events`, since the client was made. */
export interface EventStats {
  /** Events held now (queued, waiting for a retry or in flight). */
  buffered: number;
  accepted: number;
  duplicates: number;
  rejected: number;
  dropped: number;
  /** Requests that failed and were (or will be) tried again. */
  retries: number;
  /** Requests sent, including retries. */
  requests: number;
}

interface Entry extends PreparedEvent {
  seq: number;
}

interface Batch {
  entries: Entry[];
  minSeq: number;
  failures: number;
  notBefore: number;
}

const parse = (e: Entry): StepUsageEvent => JSON.parse(e.json) as StepUsageEvent;

/**
 * Holds recorded events and sends them in batches by count, bytes and time, with bounded
 * memory. A batch that cannot be delivered (network, 5xx, 429) stays held and is sent again
 * with backoff until it is stored, so a service restart loses nothing; only a full buffer,
 * a shutdown deadline or an error a retry cannot fix drops events, always through `onDrop`.
 */
export class EventBuffer {
  private queue: Entry[] = [];
  private head = 0;
  private queuedBytes = 0;
  private readonly waiting: Batch[] = [];
  private readonly inFlight = new Set<Batch>();
  private held = 0;
  private seq = 0;
  private flushTarget = -1;
  private flushTimer: TimerHandle | undefined;
  private flushDue = false;
  private retryTimer: TimerHandle | undefined;
  private retryTimerAt = Infinity;
  private readonly waiters: { target: number; tally: Tally; resolve: (result: FlushResult) => void }[] = [];
  /** Outcomes of events recorded since the last `flush()` call; closed tallies are the waiters'. */
  private current: Tally = newTally(0);
  private authErrorReported = false;
  private closed = false;
  private giveUp = false;
  private readonly counters = { accepted: 0, duplicates: 0, rejected: 0, dropped: 0, retries: 0, requests: 0 };

  constructor(
    private readonly transport: HttpTransport,
    private readonly clock: Clock,
    private readonly random: () => number,
    private readonly retry: RetryPolicy,
    private readonly options: EventBufferOptions,
  ) {}

  /** Current counters. */
  get stats(): EventStats {
    return { buffered: this.held, ...this.counters };
  }

  /** Takes one prepared event; never blocks and never throws. */
  add(prepared: PreparedEvent): void {
    // Every event gets a sequence number, taken or not, so that flush() accounts for it.
    if (this.closed) return this.drop('closed', [{ ...prepared, seq: this.seq++ }]);
    if (this.held >= this.options.maxBufferSize) return this.drop('buffer_full', [{ ...prepared, seq: this.seq++ }]);
    const entry = prepared as Entry;
    entry.seq = this.seq++;
    this.queue.push(entry);
    this.queuedBytes += entry.bytes;
    this.held++;
    const queued = this.queue.length - this.head;
    if (queued >= this.options.maxBatchSize || this.queuedBytes >= this.options.maxBatchBytes) this.pump();
    else if (this.flushTimer === undefined) this.armFlushTimer();
  }

  /**
   * Resolves once every event added before the call is stored, rejected or dropped, with the
   * outcome of the events added since the previous call.
   */
  flush(): Promise<FlushResult> {
    return this.flushing().done;
  }

  private flushing(): { tally: Tally; done: Promise<FlushResult> } {
    const target = this.seq - 1;
    const tally = this.current;
    tally.to = target;
    this.current = newTally(target + 1);
    if (this.outstandingMin() > target) return { tally, done: Promise.resolve(resultOf(tally)) };
    this.flushTarget = Math.max(this.flushTarget, target);
    // Someone now awaits delivery: re-arm the timers so that they keep the process alive.
    if (this.waiters.length === 0) this.clearTimers();
    const done = new Promise<FlushResult>((resolve) => this.waiters.push({ target, tally, resolve }));
    this.pump();
    return { tally, done };
  }

  /**
   * Stops taking events, sends what is held for up to `timeoutMs`, then drops what is left
   * (reason `shutdown`) and clears every timer so the process can exit.
   */
  async shutdown(timeoutMs: number): Promise<FlushResult> {
    this.closed = true;
    const { tally, done: flushed } = this.flushing();
    let deadline: TimerHandle | undefined;
    const expired = new Promise<'expired'>((resolve) => {
      deadline = this.clock.setTimeout(() => resolve('expired'), timeoutMs, true);
    });
    const outcome = await Promise.race([flushed.then(() => 'flushed' as const), expired]);
    this.clock.clearTimeout(deadline);
    if (outcome === 'expired') {
      this.giveUp = true;
      const left: Entry[] = this.queue.slice(this.head);
      for (const b of this.waiting.splice(0)) left.push(...b.entries);
      this.queue = [];
      this.head = 0;
      this.queuedBytes = 0;
      this.held -= left.length;
      if (left.length) this.drop('shutdown', left);
      this.settleWaiters();
    }
    this.clearTimers();
    if (outcome === 'flushed') return flushed;
    // Past the deadline: what is still in flight is not waited for.
    let pending = 0;
    for (const b of this.inFlight) for (const e of b.entries) if (e.seq >= tally.from && e.seq <= tally.to) pending++;
    return resultOf(tally, pending);
  }

  private clearTimers(): void {
    if (this.flushTimer !== undefined) this.clock.clearTimeout(this.flushTimer);
    if (this.retryTimer !== undefined) this.clock.clearTimeout(this.retryTimer);
    this.flushTimer = undefined;
    this.retryTimer = undefined;
    this.retryTimerAt = Infinity;
  }

  private armFlushTimer(): void {
    if (this.closed && this.giveUp) return;
    this.flushTimer = this.clock.setTimeout(
      () => {
        this.flushTimer = undefined;
        this.flushDue = true;
        this.pump();
      },
      this.options.flushIntervalMs,
      this.waiters.length > 0,
    );
  }

  private armRetryTimer(): void {
    let next = Infinity;
    for (const b of this.waiting) next = Math.min(next, b.notBefore);
    if (next === Infinity || next >= this.retryTimerAt) return;
    if (this.retryTimer !== undefined) this.clock.clearTimeout(this.retryTimer);
    this.retryTimerAt = next;
    this.retryTimer = this.clock.setTimeout(
      () => {
        this.retryTimer = undefined;
        this.retryTimerAt = Infinity;
        this.pump();
      },
      Math.max(0, next - this.clock.now()),
      this.waiters.length > 0,
    );
  }

  private pump(): void {
    while (this.inFlight.size < this.options.concurrency) {
      const batch = this.takeBatch();
      if (!batch) break;
      this.inFlight.add(batch);
      void this.send(batch);
    }
    if (this.queue.length - this.head > 0 && this.flushTimer === undefined) this.armFlushTimer();
    this.armRetryTimer();
  }

  private takeBatch(): Batch | undefined {
    const now = this.clock.now();
    for (let i = 0; i < this.waiting.length; i++) {
      if (this.waiting[i].notBefore <= now) return this.waiting.splice(i, 1)[0];
    }
    const queued = this.queue.length - this.head;
    if (queued === 0) return undefined;
    const full = queued >= this.options.maxBatchSize || this.queuedBytes >= this.options.maxBatchBytes;
    const due = this.flushDue || this.closed || this.queue[this.head].seq <= this.flushTarget;
    if (!full && !due) return undefined;
    const entries: Entry[] = [];
    let bytes = 0;
    while (this.head < this.queue.length && entries.length < this.options.maxBatchSize) {
      const e = this.queue[this.head];
      if (entries.length > 0 && bytes + e.bytes > this.options.maxBatchBytes) break;
      entries.push(e);
      bytes += e.bytes;
      this.head++;
    }
    this.queuedBytes -= bytes;
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    if (!full) this.flushDue = false;
    return { entries, minSeq: entries[0].seq, failures: 0, notBefore: 0 };
  }

  private async send(batch: Batch): Promise<void> {
    const body = `{"events":[${batch.entries.map((e) => e.json).join(',')}]}`;
    this.counters.requests++;
    try {
      const res = await this.transport.request<IngestResponse>({
        method: 'POST',
        path: '/v1/events',
        body,
        keepAlive: () => this.waiters.length > 0,
        onRetry: (error, attempt) => {
          this.counters.retries++;
          this.counters.requests++;
          this.options.onRetry?.(error, attempt);
        },
      });
      this.inFlight.delete(batch);
      this.settle(batch, res);
    } catch (err) {
      this.inFlight.delete(batch);
      this.failed(
        batch,
        err instanceof TollgateError ? err : new TollgateError(String(err), { code: 'internal', cause: err }),
      );
    } finally {
      this.settleWaiters();
      this.pump();
    }
  }

  private settle(batch: Batch, res: IngestResponse): void {
    this.held -= batch.entries.length;
    const results = Array.isArray(res?.results) ? res.results : [];
    const seen = new Set<number>();
    for (const r of results) {
      const entry = batch.entries[r.index];
      if (!entry || seen.has(r.index)) continue;
      seen.add(r.index);
      const tally = this.tallyOf(entry.seq);
      if (r.status === 'accepted') {
        this.counters.accepted++;
        if (tally) tally.accepted++;
      } else if (r.status === 'duplicate') {
        this.counters.duplicates++;
        if (tally) tally.duplicates++;
      } else {
        this.counters.rejected++;
        if (tally) tally.rejected++;
        const field = r.field.replace(/^events\[\d+\]\.?/, '') || '(event)';
        this.safely(() =>
          this.options.onRejected?.({ event: parse(entry), eventId: r.eventId, field, reason: r.reason }),
        );
      }
    }
    // An answer that does not account for every event is a broken contract; say so rather than count silently.
    const missing = batch.entries.filter((_, i) => !seen.has(i));
    if (missing.length)
      this.drop(
        'unrecoverable',
        missing,
        new TollgateError(`Tollgate answered ${missing.length} of ${batch.entries.length} events without a result`, {
          code: 'bad_response',
          status: 200,
        }),
      );
  }

  private failed(batch: Batch, error: TollgateError): void {
    if (this.giveUp) {
      this.held -= batch.entries.length;
      return this.drop('shutdown', batch.entries, error);
    }
    if (error.retryable) {
      batch.failures++;
      this.counters.retries++;
      batch.notBefore =
        this.clock.now() + backoffDelay(Math.min(batch.failures, 20), this.retry, this.random, error.retryAfterSeconds);
      this.waiting.push(batch);
      this.safely(() => this.options.onRetry?.(error, batch.failures));
      return;
    }
    if (error.code === 'payload_too_large' && batch.entries.length > 1) {
      const half = Math.ceil(batch.entries.length / 2);
      for (const part of [batch.entries.slice(0, half), batch.entries.slice(half)]) {
        this.waiting.push({ entries: part, minSeq: part[0].seq, failures: 0, notBefore: 0 });
      }
      return;
    }
    this.held -= batch.entries.length;
    this.drop('unrecoverable', batch.entries, error);
    if ((error.status === 401 || error.status === 403) && !this.authErrorReported) {
      this.authErrorReported = true;
      this.safely(() => this.options.onAuthError?.(error, batch.entries.length));
    }
  }

  /** The tally an event's outcome counts in: the open one, or the flush that covers it. */
  private tallyOf(seq: number): Tally | undefined {
    if (seq >= this.current.from) return this.current;
    for (const w of this.waiters) if (seq >= w.tally.from && seq <= w.tally.to) return w.tally;
    return undefined;
  }

  private drop(reason: DropReason, entries: Entry[], error?: TollgateError): void {
    this.counters.dropped += entries.length;
    for (const e of entries) {
      const tally = this.tallyOf(e.seq);
      if (!tally) continue;
      tally.dropped++;
      tally.droppedBy[reason] = (tally.droppedBy[reason] ?? 0) + 1;
      if (error && !tally.error) tally.error = error;
    }
    if (this.options.onDrop)
      this.safely(() => this.options.onDrop!({ reason, events: entries.map(parse), ...(error ? { error } : {}) }));
  }

  private outstandingMin(): number {
    let min = this.head < this.queue.length ? this.queue[this.head].seq : Infinity;
    for (const b of this.waiting) min = Math.min(min, b.minSeq);
    for (const b of this.inFlight) min = Math.min(min, b.minSeq);
    return min;
  }

  private settleWaiters(): void {
    if (!this.waiters.length) return;
    const min = this.outstandingMin();
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      if (this.waiters[i].target < min) {
        const w = this.waiters.splice(i, 1)[0];
        w.resolve(resultOf(w.tally));
      }
    }
    if (!this.waiters.length) this.flushTarget = -1;
  }

  /** A throwing callback must not break delivery of the other events. */
  private safely(fn: () => void): void {
    try {
      fn();
    } catch {
      /* the caller's callback failed; delivery goes on */
    }
  }
}
