-- Projects, their API keys and their price overrides.
CREATE TABLE projects (
  id              text PRIMARY KEY,
  name            text NOT NULL,
  unpriced_policy text NOT NULL DEFAULT 'count_tokens' CHECK (unpriced_policy IN ('count_tokens', 'deny')),
  created_at      timestamptz(3) NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id          text PRIMARY KEY,
  project_id  text NOT NULL REFERENCES projects(id),
  name        text,
  secret_hash text NOT NULL,
  scopes      text[] NOT NULL,
  created_at  timestamptz(3) NOT NULL DEFAULT now(),
  revoked_at  timestamptz(3)
);
CREATE INDEX api_keys_project_id_idx ON api_keys (project_id);

CREATE TABLE price_overrides (
  id                      text PRIMARY KEY,
  project_id              text NOT NULL REFERENCES projects(id),
  provider                text NOT NULL,
  model                   text NOT NULL,
  effective_from          timestamptz(3) NOT NULL,
  currency                text NOT NULL DEFAULT 'USD',
  input_per_million       numeric(18, 9) NOT NULL,
  output_per_million      numeric(18, 9) NOT NULL,
  cache_read_per_million  numeric(18, 9),
  cache_write_per_million numeric(18, 9),
  created_at              timestamptz(3) NOT NULL DEFAULT now(),
  UNIQUE (project_id, provider, model, effective_from)
);

-- The append-only event log, partitioned by month on occurred_at. Partitions are created ahead
-- by the service (ensure_event_partition) and on demand at ingest for any other month.
CREATE TABLE events (
  position           bigint GENERATED ALWAYS AS IDENTITY,
  tx                 xid8 NOT NULL DEFAULT pg_current_xact_id(),
  project_id         text NOT NULL,
  event_id           text NOT NULL,
  type               text NOT NULL,
  occurred_at        timestamptz(3) NOT NULL,
  recorded_at        timestamptz(3) NOT NULL DEFAULT now(),
  trace_id           text,
  span_id            text,
  run_id             text,
  thread_id          text,
  resource_id        text,
  user_id            text,
  organization_id    text,
  session_id         text,
  entity_type        text,
  entity_name        text,
  provider           text,
  model              text,
  environment        text,
  service_name       text,
  input_tokens       bigint NOT NULL DEFAULT 0,
  output_tokens      bigint NOT NULL DEFAULT 0,
  cache_read_tokens  bigint NOT NULL DEFAULT 0,
  cache_write_tokens bigint NOT NULL DEFAULT 0,
  reasoning_tokens   bigint NOT NULL DEFAULT 0,
  audio_input_tokens bigint NOT NULL DEFAULT 0,
  image_input_tokens bigint NOT NULL DEFAULT 0,
  duration_ms        double precision,
  finish_reason      text,
  step_index         integer,
  reservation_id     text,
  cost_micros        bigint,
  input_cost_micros  bigint,
  output_cost_micros bigint,
  cost_unit          text,
  cost_source        text,
  price_id           text,
  unpriced           boolean NOT NULL DEFAULT false,
  labels             jsonb,
  tags               text[] NOT NULL DEFAULT '{}',
  data               jsonb,
  PRIMARY KEY (position, occurred_at)
) PARTITION BY RANGE (occurred_at);

-- Commit-safe readers walk the log in (tx, position) order.
CREATE INDEX events_tx_position_idx ON events (tx, position);
CREATE INDEX events_project_occurred_idx ON events (project_id, occurred_at);

-- Idempotency across partitions (a unique index on a partitioned table must include occurred_at).
CREATE TABLE event_ids (
  project_id  text NOT NULL,
  event_id    text NOT NULL,
  occurred_at timestamptz(3) NOT NULL,
  PRIMARY KEY (project_id, event_id)
);

-- Creates the monthly partition that holds `at`, if it does not exist yet.
CREATE FUNCTION ensure_event_partition(at timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  month_start timestamptz := date_trunc('month', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  month_end   timestamptz := month_start + interval '1 month';
  part_name   text := 'events_' || to_char(month_start AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
  IF to_regclass(part_name) IS NOT NULL THEN
    RETURN part_name;
  END IF;
  -- Two replicas may race on a new month; the loser sees the winner's table (advisory locks do
  -- not refresh the catalog snapshot, so the error is the reliable signal).
  BEGIN
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
                   part_name, month_start, month_end);
  EXCEPTION WHEN duplicate_table OR unique_violation THEN
    NULL;
  END;
  RETURN part_name;
END $$;
