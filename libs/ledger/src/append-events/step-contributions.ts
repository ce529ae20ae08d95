import { scopeKeysOf } from '../budgets/effective-limits';
import type { StepContribution } from '../budget-alerts/alert-decision';
import type { StepRow, StoredStep } from './insert-step-events.sql';

/** What the stored steps of a batch (duplicates left out) added to their scopes, in batch order. */
export function stepContributions(
  rows: readonly StepRow[],
  stored: ReadonlyMap<string, StoredStep>,
): StepContribution[] {
  return rows
    .filter((r) => stored.has(r.event.eventId))
    .map(({ event, occurredAt, cost }) => ({
      eventId: event.eventId,
      occurredAt,
      scopeKeys: scopeKeysOf(event),
      inputTokens: event.usage.inputTokens,
      outputTokens: event.usage.outputTokens,
      costByUnit: cost.priced && cost.costMicros > 0n ? { [cost.currency]: Number(cost.costMicros) } : {},
    }));
}
