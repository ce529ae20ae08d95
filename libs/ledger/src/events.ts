import { SYSTEM_EVENT_ID_PREFIX, type GuardFinding, type StepUsageEvent } from '@tollgate/contracts';

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
  data: {
    stepId: string;
    scopeKeys: string[];
    estimatedCost: number;
    costUnit: string | null;
    inputTokens: number;
    outputTokens: number;
    inputTokensMargin: number;
    expiresAt: string;
  };
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
  data: {
    stepEventId: string;
    scopeKeys: string[];
    reserved: Record<string, unknown>;
    actual: Record<string, unknown>;
  };
}

/** Audit of a denial or a warning. */
export interface GuardDecided extends SystemEventBase {
  type: 'GuardDecided';
  data: { decision: 'allow' | 'deny'; violations: GuardFinding[]; warnings: GuardFinding[]; stepId: string | null };
}

/** What a budget alert names: the budget (scope, window, policy, limit) and where its usage stood. */
export interface BudgetAlertData {
  scope: string;
  scopeKey: string;
  /** null for a run budget. */
  window: string | null;
  /** `policy:<name>` or `request`. */
  source: string;
  limitType: string;
  /** In `unit` (micro-units are never shown). */
  usage: number;
  limit: number;
  unit: string;
}

/**
 * A step's commit (or a reprice) took a budget's committed usage from below `threshold` percent
 * of its limit to at or above it. Once per crossing: a rolling window alerts again only after its
 * usage fell `hysteresis` points below the threshold; a run budget crosses once.
 */
export interface BudgetThresholdCrossed extends SystemEventBase {
  type: 'BudgetThresholdCrossed';
  data: BudgetAlertData & { threshold: number; hysteresis: number; stepEventId: string | null; sequence: number };
}

/** A hard limit denied a step: once per budget until its usage fell back below it (by the hysteresis). */
export interface BudgetExhausted extends SystemEventBase {
  type: 'BudgetExhausted';
  data: BudgetAlertData & { stepId: string | null; sequence: number };
}

/** The events the service itself appends to the log, beside the clients' step events. */
export type SystemEvent =
  | BudgetReserved
  | ReservationSettled
  | ReservationReleased
  | ReservationExceeded
  | GuardDecided
  | BudgetThresholdCrossed
  | BudgetExhausted;

/** A step's cost as priced at one time; all null when it had no price. */
export interface StepCost {
  costMicros: number | null;
  inputCostMicros: number | null;
  outputCostMicros: number | null;
  costUnit: string | null;
  priceId: string | null;
  source: 'override' | 'catalog' | null;
}

/**
 * A stored step's cost was recomputed with the prices in force at its occurredAt, and differed
 * from its latest cost (its own, or its last correction's). The step's event is never rewritten:
 * this correction is appended under `tg:reprice:<stepEventId>:<sequence>`, stamped with the
 * step's occurredAt (so it falls in the step's buckets and partition) and carrying the step's
 * scope ids, dimensions and usage, with the new cost in the cost columns. Readers apply
 * `new − old` (which moves the step between cost units when the unit changed).
 */
export interface StepRepriced {
  type: 'StepRepriced';
  eventId: string;
  occurredAt: Date;
  data: { stepEventId: string; stepPosition: string; sequence: number; old: StepCost; new: StepCost };
}

/** Every event of the ledger. */
export type LedgerEvent = SystemEvent | StepRepriced | ({ type: 'StepUsageRecorded' } & StepUsageEvent);

/** The id of a system event: deterministic where it must happen once (`reservation:<id>:settled`). */
export const systemEventId = (...parts: string[]) => `${SYSTEM_EVENT_ID_PREFIX}${parts.join(':')}`;

/** Published on the in-process CQRS bus after a reprice committed corrections (wakes the projector). */
export class StepsRepriced {
  constructor(
    readonly projectId: string,
    readonly corrections: number,
  ) {}
}
