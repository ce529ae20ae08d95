import type { StepUsageEvent } from './step-event';

/**
 * Published on the in-process CQRS bus after a step event commits. A convenience for hooks in
 * the same process only: projections and exporters read the log itself, which is the source.
 * Here rather than in the ledger, which publishes it, so that its subscribers (the telemetry
 * counters, the metrics projector) need not import the ledger.
 */
export class StepUsageRecorded {
  constructor(
    readonly projectId: string,
    readonly position: bigint,
    readonly event: StepUsageEvent,
    readonly costMicros: bigint | null,
  ) {}
}
