import { fromAiSdk } from '../../../contracts/src/usage/normalize-usage';
import type { StepUsageShape } from '../mastra-shapes';
import type { GuardContext, StepUsageEvent, TollgateGuardClient } from '../tollgate/guard-client';
import type { CostGuardStepArgs } from './mastra-args';
import type { GuardLog } from './options';
import type { PendingStep, RunState } from './run-state';

/**
 * How a step's usage reaches Tollgate, settling its reservation: handed to the client as the
 * step ends, delivered with the client's next batch, and flushed when the run needs it stored
 * (see the `awaitRecords` option). Releasing a reservation settles a step that used nothing.
 */
export class RecordDelivery {
  constructor(
    private readonly client: TollgateGuardClient,
    /** The `awaitRecords` option: wait for each record to be stored. */
    private readonly awaitRecords: boolean,
    private readonly log: GuardLog,
  ) {}

  /** Releases a reservation; false when that fails (logged, with `why`): a shrunk answer then stands, as cautious as it was. */
  async release(reservationId: string, why: string): Promise<boolean> {
    try {
      await this.client.guard.release!(reservationId);
      return true;
    } catch (error) {
      this.log(
        `Cost guard: could not release reservation ${reservationId} ${why}: ${(error as Error)?.message ?? String(error)}`,
      );
      return false;
    }
  }

  /**
   * Records every earlier step of this run whose usage was not recorded yet, from `steps`. This
   * is the fallback when `processLLMResponse` did not run (an older Mastra, or a failed record).
   */
  async settleFromSteps(run: RunState, steps: CostGuardStepArgs['steps'], ids: GuardContext): Promise<void> {
    for (const step of run.pending) {
      if (step.recorded) continue;
      const done = steps[step.stepIndex];
      if (!done?.usage) continue;
      step.context = { ...ids, ...step.context };
      await this.record(run, step, done.usage, done.providerMetadata, this.awaitRecords);
    }
  }

  /**
   * Records the step's usage, which settles its reservation. With `wait`, resolves once it is
   * stored. Otherwise once it is handed to the client: a buffering client (the SDK) delivers it
   * with its next batch, within its flush interval, or with the run's last record, whichever
   * comes first — one request for several steps, none on the next step's path — and
   * {@link drain} flushes it when the run needs it stored.
   */
  async record(
    run: RunState,
    step: PendingStep,
    usage: StepUsageShape,
    providerMetadata: Readonly<Record<string, unknown>> | undefined,
    wait: boolean,
  ): Promise<void> {
    if (step.recorded) return;
    step.recorded = true;
    const c = step.context;
    // Providers disagree on what input tokens are (Anthropic's leave the cache out), and AI SDK 5
    // passes each one's meaning through. An event with cache reads above its input total would be
    // refused, leaving the reservation to hold the worst case until it expires.
    const normalized = fromAiSdk(usage, { provider: step.providerId, providerMetadata, specVersion: step.specVersion });
    const event: StepUsageEvent = {
      eventId: `${run.runKey}:${step.stepIndex}`,
      occurredAt: new Date().toISOString(),
      traceId: c.traceId ?? c.runId ?? run.runKey,
      ...pick(c, ['runId', 'threadId', 'resourceId', 'userId', 'organizationId', 'sessionId', 'entityName']),
      entityType: c.entityType ?? 'agent',
      provider: step.provider,
      model: step.model,
      usage: normalized.usage,
      ...(step.reservationId ? { reservationId: step.reservationId } : {}),
      stepIndex: step.stepIndex,
    };
    try {
      await this.client.events.record(event);
    } catch (error) {
      return this.unrecorded([step], error);
    }
    // A client without flush has sent it. Until a record is stored, Tollgate counts its step at
    // the reservation (the worst case), so the budget never overspends meanwhile.
    if (!this.client.events.flush) return;
    run.unflushed.push(step);
    if (wait) await this.drain(run);
  }

  /**
   * Left unrecorded on failure: the next step records them again (same eventId, so Tollgate
   * deduplicates). An unrecorded reservation holds the worst case until it expires, then stops counting.
   */
  private unrecorded(steps: PendingStep[], error: unknown): void {
    for (const step of steps) step.recorded = false;
    this.log(
      `Cost guard: could not record the usage of step ${steps.map((s) => s.stepIndex).join(', ')}: ${(error as Error)?.message ?? String(error)}`,
    );
  }

  /** Flushes this run's records handed to the client, and waits until every one is stored (or failed). */
  async drain(run: RunState): Promise<void> {
    const flush = this.client.events.flush;
    if (run.unflushed.length && flush) {
      const steps = run.unflushed.splice(0);
      let delivery: Promise<unknown>;
      try {
        delivery = Promise.resolve(flush.call(this.client.events));
      } catch (error) {
        delivery = Promise.reject(error);
      }
      const tracked: Promise<void> = delivery.then(
        () => undefined,
        (error: unknown) => this.unrecorded(steps, error),
      );
      run.inFlight.add(tracked);
      void tracked.finally(() => run.inFlight.delete(tracked));
    }
    while (run.inFlight.size) await Promise.all([...run.inFlight]);
  }
}

function pick<T extends object, K extends keyof T>(from: T, keys: K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const key of keys) if (from[key] !== undefined) out[key] = from[key];
  return out;
}
