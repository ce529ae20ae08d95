import { SYSTEM_EVENT_ID_PREFIX, type GuardFinding, type StepUsageEvent } from '@tollgate/contracts';

/** The types of the event log, past tense. */
export const EventType = {
  StepUsageRecorded: 'StepUsageRecorded',
  BudgetReserved: 'BudgetReserved',
  ReservationSettled: 'ReservationSettled',
  ReservationReleased: 'ReservationReleased',
  ReservationExceeded: 'ReservationExceeded',
  GuardDecided: 'GuardDecided',
  PriceCatalogChanged: 'PriceCatalogChanged',
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

/** The scope ids and entity an event is filed under (columns of the log). */
export interface EventScopes {
  traceId?: string;
  runId?: string;
  threadId?: string;
  resourceId?: string;
  userId?: string;
  organizationId?: string;
  sessionId?: string;
  entityType?: string;
  entityName?: string;
}

interface SystemEventBase {
  /** In the service's own namespace (see {@link systemEventId}): no client event can take it. */
  eventId: string;
  occurredAt: Date;
  scopes?: EventScopes;
  reservationId?: string;
}

/** A reservation was made: its estimate holds budget in `scopeKeys` until settled, released or expired. */
export interface BudgetReserved extends SystemEventBase {
  type: 'BudgetReserved';
  reservationId: string;
  data: { stepId: string; scopeKeys: string[]; estimatedCost: number; costUnit: string | null; inputTokens: number; outputTokens: number; inputTokensMargin: number; expiresAt: string };
}

/** A step event named the reservation: its actual usage replaced the estimate. */
export interface ReservationSettled extends SystemEventBase {
  type: 'ReservationSettled';
  reservationId: string;
  data: { stepEventId: string };
}

/** A reservation was released by its caller, or lapsed at expiry. */
export interface ReservationReleased extends SystemEventBase {
  type: 'ReservationReleased';
  reservationId: string;
  data: { reason: 'released' | 'lapsed'; costMicros: number; inputTokens: number; outputTokens: number };
}

/** A settlement's actual usage passed what was reserved. */
export interface ReservationExceeded extends SystemEventBase {
  type: 'ReservationExceeded';
  reservationId: string;
  data: { stepEventId: string; scopeKeys: string[]; reserved: Record<string, unknown>; actual: Record<string, unknown> };
}

/** Audit of a denial or a warning. */
export interface GuardDecided extends SystemEventBase {
  type: 'GuardDecided';
  data: { decision: 'allow' | 'deny'; violations: GuardFinding[]; warnings: GuardFinding[]; stepId: string | null };
}

/** The events the service itself appends to the log, beside the clients' step events. */
export type SystemEvent = BudgetReserved | ReservationSettled | ReservationReleased | ReservationExceeded | GuardDecided;

/** Every event of the ledger. */
export type LedgerEvent = SystemEvent | ({ type: 'StepUsageRecorded' } & StepUsageEvent);

/** The id of a system event: deterministic where it must happen once (`reservation:<id>:settled`). */
export const systemEventId = (...parts: string[]) => `${SYSTEM_EVENT_ID_PREFIX}${parts.join(':')}`;

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
