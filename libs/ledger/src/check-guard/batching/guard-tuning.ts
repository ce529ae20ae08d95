import { Injectable } from '@nestjs/common';

/**
 * How the guard batches its reserving checks: measured choices, not an operator's settings (an
 * operator bounds the guard with GUARD_TIMEOUT_MS and the queue's GUARD_QUEUE_* instead). A bench
 * or a test that compares a variant sets these on the application's instance before it serves
 * (see bench/guard and test/e2e/guard-one-trip.spec.ts); the service never reads them from its
 * environment.
 */
@Injectable()
export class GuardTuning {
  /** The most checks one group commit decides. */
  maxBatch = 128;
  /** Group commits a process runs at once, each on one pooled connection (at most half the pool). */
  maxConcurrent = 4;
  /**
   * Group commits of one project at once: with one, its checks that arrive meanwhile go in its
   * next batch (fewer, larger transactions), while other projects' batches run beside it.
   */
  maxPerLane = 1;
  /**
   * A group commit whose budgets this process committed on before is decided on the usage those
   * commits left, and written in one round trip when the usage under the locks is within what
   * the decisions allow (else decided again, in two). Measured: see bench/README.md.
   */
  oneTrip = true;
}
