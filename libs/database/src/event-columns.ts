/** The log's columns (tx is xid8, which the driver cannot decode: it is read as text). */
export const EVENT_COLUMNS = [
  'position',
  'project_id',
  'event_id',
  'type',
  'occurred_at',
  'recorded_at',
  'trace_id',
  'span_id',
  'run_id',
  'thread_id',
  'resource_id',
  'user_id',
  'organization_id',
  'session_id',
  'entity_type',
  'entity_name',
  'provider',
  'model',
  'environment',
  'service_name',
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'cache_write_tokens',
  'cache_write_1h_tokens',
  'reasoning_tokens',
  'audio_input_tokens',
  'image_input_tokens',
  'duration_ms',
  'finish_reason',
  'step_index',
  'reservation_id',
  'cost_micros',
  'input_cost_micros',
  'output_cost_micros',
  'cost_unit',
  'cost_source',
  'price_id',
  'unpriced',
  'labels',
  'tags',
  'data',
] as const;

export const EVENT_SELECT = `tx::text AS tx, ${EVENT_COLUMNS.join(', ')}`;

/**
 * The condition a query over steps by time states to use the (project, time) index of steps
 * (`events_project_steps_idx`, migration 20261201161000): always true, and part of the index's
 * predicate, because PostgreSQL uses a partial index only for a query that implies its predicate.
 * The guard's reads of a scope never state it, so they always go through their scope's own
 * index: with statistics from when a project had one resource, a generic plan otherwise walked
 * every other resource's steps of the hour (read-scope-usage.plan.int.spec.ts).
 */
export const onStepsByTime = (alias: string) => `${alias}.position > 0`;
