/** Why an ingest request was refused (with 503 and Retry-After). */
export type Refusal = 'pool' | 'bytes';

/**
 * Sheds ingest before it costs the instance anything. A request is refused (503 + Retry-After) as
 * it arrives, before its body is read, when the database pool has more than `maxPoolWaiting`
 * requests queued for a connection, or when the bodies of the ingest requests in flight (arriving,
 * parsed, validated, stored) would pass `maxBytes` — parsing and validating them is what keeps the
 * event loop, and with it the readiness probe, waiting. The pool is asked again just before the
 * handler runs. A refused request is answered at once instead of waiting its turn only to time out.
 */
export class IngestAdmission {
  private bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly maxPoolWaiting: number,
    private readonly pool: { readonly waitingCount: number },
  ) {}

  /** The pool's queue is past its bound. */
  poolBacklogged(): boolean {
    return this.pool.waitingCount > this.maxPoolWaiting;
  }

  /** A request declaring a body of `bytes`: a refusal, or null once they are counted in flight (give them back with `release`). */
  admit(bytes: number): Refusal | null {
    if (this.poolBacklogged()) return 'pool';
    // One body always fits, whatever its size: INGEST_MAX_BODY_BYTES bounds a single body.
    if (this.bytes > 0 && this.bytes + bytes > this.maxBytes) return 'bytes';
    this.bytes += bytes;
    return null;
  }

  release(bytes: number): void {
    this.bytes -= bytes;
  }

  get bytesInFlight(): number {
    return this.bytes;
  }
}
