import {
  problemsOf,
  stepUsageEventSchema,
  withProviderUsageRead,
  type IngestResult,
  type StepUsageEvent,
} from '@tollgate/contracts';

export interface ValidatedBatch {
  /** Events to append, each with its index in the request. */
  valid: { index: number; event: StepUsageEvent }[];
  /** Results already decided (rejected, or repeated within the batch), by index. */
  decided: Map<number, IngestResult>;
}

const eventIdOf = (raw: unknown): string | null =>
  raw && typeof raw === 'object' && typeof (raw as { eventId?: unknown }).eventId === 'string'
    ? (raw as { eventId: string }).eventId
    : null;

/**
 * Checks each event on its own: one bad event is rejected with its field and reason, the others
 * go on. An eventId repeated inside one batch is the same event: the later copies are duplicates.
 */
export interface TimeBounds {
  maxFutureSkewMs: number;
  /** Days an event may be older than now. */
  maxAgeDays: number;
}

export function validateStepEvents(
  raw: readonly unknown[],
  now: Date,
  { maxFutureSkewMs, maxAgeDays }: TimeBounds,
): ValidatedBatch {
  const valid: ValidatedBatch['valid'] = [];
  const decided = new Map<number, IngestResult>();
  const seen = new Set<string>();
  const latest = now.getTime() + maxFutureSkewMs;
  const earliest = now.getTime() - maxAgeDays * 86_400_000;
  raw.forEach((candidate, index) => {
    // reportInput: without it zod 4 leaves issue.input undefined, and a wrong value would read as "is required".
    const parsed = stepUsageEventSchema.safeParse(candidate, { reportInput: true });
    if (!parsed.success) {
      const [first] = problemsOf(parsed.error, `events[${index}]`);
      decided.set(index, {
        index,
        eventId: eventIdOf(candidate),
        status: 'rejected',
        field: first.field,
        reason: first.reason,
      });
      return;
    }
    // A providerUsage is read here, once: everything downstream sees Tollgate's usage.
    const event = withProviderUsageRead(parsed.data);
    if (Date.parse(event.occurredAt) > latest) {
      decided.set(index, {
        index,
        eventId: event.eventId,
        status: 'rejected',
        field: `events[${index}].occurredAt`,
        reason: `is more than ${maxFutureSkewMs} ms in the future`,
      });
      return;
    }
    if (Date.parse(event.occurredAt) < earliest) {
      decided.set(index, {
        index,
        eventId: event.eventId,
        status: 'rejected',
        field: `events[${index}].occurredAt`,
        reason: `is more than ${maxAgeDays} days in the past (the oldest this project accepts)`,
      });
      return;
    }
    if (seen.has(event.eventId)) {
      decided.set(index, { index, eventId: event.eventId, status: 'duplicate' });
      return;
    }
    seen.add(event.eventId);
    valid.push({ index, event });
  });
  return { valid, decided };
}
