/**
 * What the clients saw, kept for the invariants and for the report of a failure: every answer's
 * status, every reservation a caller received, every check whose answer was lost, every ingest
 * result by event id, and one line per step, fault and exchange.
 */

export interface Entry {
  /** Milliseconds since the load began. */
  t: number;
  who: string;
  what: string;
  /** Step ids, reservation ids, event ids and scope keys the line is about (for the report). */
  keys: string[];
}

export interface BadAnswer {
  t: number;
  who: string;
  route: string;
  status: number;
  retryAfter: string | null;
  body: string;
}

export interface Held {
  stepId: string;
  agent: string;
  inputTokens: number;
  outputTokens: number;
  estimatedCost: number;
  expiresAt: string;
}

export interface IngestTally {
  accepted: number;
  duplicate: number;
  rejected: number;
  /** Sent, and no answer came back: stored or not, the service alone knows. */
  lost: number;
  reasons: string[];
}

export class Journal {
  /** When the load began (set again by begin()). */
  private started = Date.now();
  readonly entries: Entry[] = [];
  /** `<route> <status>` → answers. */
  readonly statuses = new Map<string, number>();
  readonly badAnswers: BadAnswer[] = [];
  readonly received = new Map<string, Held>();
  /** Reserving checks sent whose answer never came (a killed service, a cut connection, a timeout). */
  readonly lostChecks = new Set<string>();
  /** Reserving checks answered with the caller's failMode: the service itself lost its commit's outcome. */
  readonly failModeChecks = new Set<string>();
  readonly ingest = new Map<string, IngestTally>();
  /** What was noticed that no invariant covers (shown in the summary). */
  readonly notes = new Map<string, number>();

  begin(): void {
    this.started = Date.now();
  }

  now(): number {
    return Date.now() - this.started;
  }

  log(who: string, what: string, keys: string[] = []): void {
    this.entries.push({ t: this.now(), who, what, keys });
  }

  note(what: string): void {
    this.notes.set(what, (this.notes.get(what) ?? 0) + 1);
  }

  /** Every answer (a refused connection or a lost request is none). */
  answer(who: string, route: string, status: number, retryAfter: string | null, body: string): void {
    const key = `${route} ${status}`;
    this.statuses.set(key, (this.statuses.get(key) ?? 0) + 1);
    if (status >= 500 && !(status === 503 && retryAfter !== null))
      this.badAnswers.push({ t: this.now(), who, route, status, retryAfter, body: body.slice(0, 500) });
  }

  tally(eventId: string): IngestTally {
    let t = this.ingest.get(eventId);
    if (!t) this.ingest.set(eventId, (t = { accepted: 0, duplicate: 0, rejected: 0, lost: 0, reasons: [] }));
    return t;
  }

  /** The last `n` lines, of those about any of `keys` when given. */
  tail(n: number, keys?: readonly string[]): Entry[] {
    const wanted = keys ? new Set(keys) : undefined;
    const out: Entry[] = [];
    for (let i = this.entries.length - 1; i >= 0 && out.length < n; i--) {
      const e = this.entries[i];
      if (!wanted || e.keys.some((k) => wanted.has(k))) out.push(e);
    }
    return out.reverse();
  }
}

export function formatEntry(e: Entry): string {
  return `  +${(e.t / 1000).toFixed(3).padStart(8)}s ${e.who.padEnd(6)} ${e.what}`;
}
