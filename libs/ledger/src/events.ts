import type { StepUsageEvent } from '@tollgate/contracts';

/** The types of the event log, past tense. */
export const EventType = {
  StepUsageRecorded: 'StepUsageRecorded',
  BudgetReserved: 'BudgetReserved',
  ReservationSettled: 'ReservationSettled',
  ReservationReleased: 'ReservationReleased',
  GuardDecided: 'GuardDecided',
  PriceCatalogChanged: 'PriceCatalogChanged',
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

/**
 * Published on the in-process CQRS bus after a step event commits. A convenience for hooks in
 * the same process only: projections and exporters read the log itself, which is the source.
 */
export class StepUsageRecorded {
  constructor(
    readonly projectId: string,
    readonly position: bigint,
    readonly event: StepUsageEvent,
    readonly costMicros: bigint | null,
  ) {}
}
