import type { StepUsageEvent } from '@tollgate/contracts';
import type { Sql } from '@tollgate/database';
import { priceStep } from '../pricing/price-step';
import { insertStepEvents } from './insert-step-events.sql';

/** Step events as ingest stores them, for specs: each priced at its own occurredAt by the built-in prices. */
export const insertPricedSteps = (sql: Sql, project: string, events: readonly StepUsageEvent[]) =>
  insertStepEvents(
    sql,
    project,
    events.map((e) => ({
      event: e,
      occurredAt: new Date(e.occurredAt),
      cost: priceStep(e, new Date(e.occurredAt), []),
    })),
  );
