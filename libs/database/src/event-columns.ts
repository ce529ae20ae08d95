/** The log's columns (tx is xid8, which the driver cannot decode: it is read as text). */
export const EVENT_COLUMNS = [
  'position', 'project_id', 'event_id', 'type', 'occurred_at', 'recorded_at', 'trace_id', 'span_id', 'run_id',
  'thread_id', 'resource_id', 'user_id', 'organization_id', 'session_id', 'entity_type', 'entity_name', 'provider',
  'model', 'environment', 'service_name', 'input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens',
  'cache_write_1h_tokens', 'reasoning_tokens', 'audio_input_tokens', 'image_input_tokens', 'duration_ms', 'finish_reason', 'step_index',
  'reservation_id', 'cost_micros', 'input_cost_micros', 'output_cost_micros', 'cost_unit', 'cost_source', 'price_id',
  'unpriced', 'labels', 'tags', 'data',
] as const;

export const EVENT_SELECT = `tx::text AS tx, ${EVENT_COLUMNS.join(', ')}`;
