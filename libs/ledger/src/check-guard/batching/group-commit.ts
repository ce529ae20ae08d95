/**
 * Queues reserving checks per scope key and hands them to `run` in batches (group commit):
 * - a batch takes, in arrival order, every waiting check of one lane (a project) whose keys no
 *   running batch holds, so one transaction decides many checks of a hot budget, each after those
 *   that arrived before it; a lane runs at most `maxPerLane` batches at once;
 * - a check never overtakes an earlier one that shares a key with it;
 * - waiting is bounded: a check still queued after `maxWaitMs`, or arriving at a key with
 *   `maxQueuedPerKey` checks already queued, is answered busy — before anything was done for it,
 *   so a busy answer never leaves anything behind.
 * Once in a batch, a check waits for its batch: its answer is what the batch committed.
 */
export interface GroupCommitOptions {
  maxBatch: number;
  maxConcurrent: number;
  /**
   * Batches of one lane at once: with one, a project's checks that arrive while its batch runs all
   * go in its next one (fewer, larger transactions), while other projects' batches run beside it.
   */
  maxPerLane: number;
  maxWaitMs: number;
  maxQueuedPerKey: number;
}

export type Queued<R> = { kind: 'done'; value: R } | { kind: 'busy'; retryAfterMs: number };

interface Entry<T, R> {
  lane: string;
  keys: string[];
  item: T;
  resolve: (r: Queued<R>) => void;
  reject: (e: unknown) => void;
  timer?: NodeJS.Timeout;
}

export class GroupCommit<T, R> {
  private pending: Entry<T, R>[] = [];
  private readonly held = new Set<string>();
  private readonly queuedPerKey = new Map<string, number>();
  /** Checks queued per lane: a lane at its limit of batches makes none, however many it has queued. */
  private readonly queuedPerLane = new Map<string, number>();
  private running = 0;
  private readonly runningPerLane = new Map<string, number>();
  /** Moving average of a batch's duration, for retry hints. */
  private batchMs = 5;

  constructor(
    private readonly options: GroupCommitOptions,
    private readonly run: (lane: string, items: T[]) => Promise<R[]>,
  ) {}

  /** Checks queued now (for /metrics and tests). */
  get depth(): number {
    return this.pending.length;
  }

  submit(lane: string, keys: readonly string[], item: T): Promise<Queued<R>> {
    const laneKeys = [...new Set(keys)].map((k) => `${lane}\u001f${k}`);
    const deepest = Math.max(0, ...laneKeys.map((k) => this.queuedPerKey.get(k) ?? 0));
    if (deepest >= this.options.maxQueuedPerKey) return Promise.resolve(this.busy(deepest));
    return new Promise<Queued<R>>((resolve, reject) => {
      const entry: Entry<T, R> = { lane, keys: laneKeys, item, resolve, reject };
      for (const k of laneKeys) this.queuedPerKey.set(k, (this.queuedPerKey.get(k) ?? 0) + 1);
      this.queuedPerLane.set(lane, (this.queuedPerLane.get(lane) ?? 0) + 1);
      this.pending.push(entry);
      entry.timer = setTimeout(() => this.expire(entry), this.options.maxWaitMs);
      entry.timer.unref?.();
      this.schedule();
    });
  }

  private busy(queued: number): Queued<R> {
    const rounds = 1 + Math.floor(queued / this.options.maxBatch);
    return { kind: 'busy', retryAfterMs: Math.min(2000, Math.max(10, Math.round(this.batchMs * rounds))) };
  }

  private dequeue(entry: Entry<T, R>) {
    clearTimeout(entry.timer);
    const queued = (this.queuedPerLane.get(entry.lane) ?? 1) - 1;
    if (queued <= 0) this.queuedPerLane.delete(entry.lane);
    else this.queuedPerLane.set(entry.lane, queued);
    for (const k of entry.keys) {
      const n = (this.queuedPerKey.get(k) ?? 1) - 1;
      if (n <= 0) this.queuedPerKey.delete(k);
      else this.queuedPerKey.set(k, n);
    }
  }

  private expire(entry: Entry<T, R>) {
    const i = this.pending.indexOf(entry);
    if (i < 0) return; // already in a batch: it gets what the batch commits
    this.pending.splice(i, 1);
    const deepest = Math.max(0, ...entry.keys.map((k) => this.queuedPerKey.get(k) ?? 0));
    this.dequeue(entry);
    entry.resolve(this.busy(deepest));
  }

  /** Whether some lane with queued checks may start a batch (else a scan of the queue would find none). */
  private startable(): boolean {
    for (const lane of this.queuedPerLane.keys())
      if ((this.runningPerLane.get(lane) ?? 0) < this.options.maxPerLane) return true;
    return false;
  }

  private schedule() {
    // Checks arriving while their project's batch runs (most of them, under load) wait for it:
    // each would otherwise scan the whole queue for a batch that cannot start.
    while (this.running < this.options.maxConcurrent && this.pending.length && this.startable()) {
      const batch: Entry<T, R>[] = [];
      const blocked = new Set<string>();
      let lane: string | undefined;
      const rest: Entry<T, R>[] = [];
      for (const e of this.pending) {
        const free =
          batch.length < this.options.maxBatch &&
          (lane === undefined ? (this.runningPerLane.get(e.lane) ?? 0) < this.options.maxPerLane : e.lane === lane) &&
          !e.keys.some((k) => this.held.has(k) || blocked.has(k));
        if (free) {
          batch.push(e);
          lane = e.lane;
        } else {
          // Later checks sharing a key with this one must not overtake it.
          for (const k of e.keys) blocked.add(k);
          rest.push(e);
        }
      }
      if (!batch.length) return;
      this.pending = rest;
      const keys = new Set<string>();
      for (const e of batch) {
        this.dequeue(e);
        for (const k of e.keys) keys.add(k);
      }
      for (const k of keys) this.held.add(k);
      this.running++;
      this.runningPerLane.set(lane!, (this.runningPerLane.get(lane!) ?? 0) + 1);
      void this.execute(lane!, batch, keys);
    }
  }

  private async execute(lane: string, batch: Entry<T, R>[], keys: Set<string>) {
    const started = performance.now();
    try {
      const results = await this.run(
        lane,
        batch.map((e) => e.item),
      );
      batch.forEach((e, i) => e.resolve({ kind: 'done', value: results[i] }));
    } catch (err) {
      for (const e of batch) e.reject(err);
    } finally {
      this.batchMs = this.batchMs * 0.8 + (performance.now() - started) * 0.2;
      for (const k of keys) this.held.delete(k);
      this.running--;
      const lanes = (this.runningPerLane.get(lane) ?? 1) - 1;
      if (lanes > 0) this.runningPerLane.set(lane, lanes);
      else this.runningPerLane.delete(lane);
      this.schedule();
    }
  }
}
