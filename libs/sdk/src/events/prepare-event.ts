import { problemsOf } from '../../../contracts/src/validation';
import {
  stepUsageEventSchema,
  type ParsedStepUsageEvent,
  type StepUsageEventInput,
} from '../../../contracts/src/step-event';
import { TollgateError } from '../errors';

/**
 * A step event as `events.record` takes it: the service's own schema, with `eventId` and
 * `occurredAt` optional (generated once, on record, so every retry carries the same values and
 * the service acknowledges a retried batch as duplicates instead of counting it twice).
 */
export type RecordStepEvent = Omit<StepUsageEventInput, 'eventId' | 'occurredAt'> & {
  /** Idempotency key; a random UUID when missing. */
  eventId?: string;
  /** When the step ended; now when missing. */
  occurredAt?: string | Date;
};

/** An event checked against the service's schema, serialized once for every attempt to send it. */
export interface PreparedEvent {
  eventId: string;
  json: string;
  bytes: number;
}

const byteLength: (s: string) => number =
  typeof Buffer !== 'undefined' ? (s) => Buffer.byteLength(s, 'utf8') : (s) => new TextEncoder().encode(s).length;

/**
 * Fills `eventId` and `occurredAt`, validates with the schema the service validates with, and
 * serializes. Throws a {@link TollgateError} naming the field when the event is invalid, so a
 * bad event fails where it was made instead of being dropped later by the service.
 */
export function prepareEvent(input: RecordStepEvent, now: number, newId: () => string): PreparedEvent {
  if (input === null || typeof input !== 'object') {
    throw new TollgateError('events.record expects a step event object', {
      code: 'validation_failed',
      field: '(event)',
    });
  }
  const occurredAt =
    input.occurredAt instanceof Date
      ? input.occurredAt.toISOString()
      : (input.occurredAt ?? new Date(now).toISOString());
  const candidate = { ...input, eventId: input.eventId ?? newId(), occurredAt };
  // reportInput lets problemsOf tell a missing field ("is required") from a wrong one.
  const parsed = stepUsageEventSchema.safeParse(candidate, { reportInput: true });
  if (!parsed.success) {
    const [first] = problemsOf(parsed.error);
    throw new TollgateError(`Invalid step event: ${first.field} ${first.reason}`, {
      code: 'validation_failed',
      field: first.field,
    });
  }
  // Sent as given: a providerUsage is read by the service, with the provider's meaning.
  const event: ParsedStepUsageEvent = parsed.data;
  const json = JSON.stringify(event);
  return { eventId: event.eventId, json, bytes: byteLength(json) };
}
