-- Asynchronous projections of the event log: a checkpoint per projection, and the metric rollups
-- that the Mastra-compatible metric queries read (see libs/metrics).

-- Where each projection stopped in the log, in the commit-safe (tx, position) order. A batch of
-- the projection updates its rows and this checkpoint in one transaction, so a crash never counts
-- an event twice; the row lock is also the projection's mutex (one worker at a time).
CREATE TABLE projection_checkpoints (
  name             text PRIMARY KEY,
  tx               xid8 NOT NULL DEFAULT '0',
  position         bigint NOT NULL DEFAULT 0,
  events_projected bigint NOT NULL DEFAULT 0,
  updated_at       timestamptz(3) NOT NULL DEFAULT now()
);
INSERT INTO projection_checkpoints (name) VALUES ('metric_rollups');

-- Each distinct combination of dimensions seen in a project, so that rollup rows carry one small
-- id instead of twelve text columns. `key` is the dimensions joined by U+001F (ids never contain
-- control characters, see the step event contract). Rows are never deleted, so ids stay stable
-- across a replay.
CREATE TABLE metric_dimensions (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id      text NOT NULL,
  key             text NOT NULL,
  entity_type     text,
  entity_name     text,
  provider        text,
  model           text,
  cost_unit       text,
  environment     text,
  service_name    text,
  resource_id     text,
  thread_id       text,
  user_id         text,
  organization_id text,
  session_id      text,
  UNIQUE (project_id, key)
);
CREATE INDEX metric_dimensions_resource_idx ON metric_dimensions (project_id, resource_id) WHERE resource_id IS NOT NULL;
CREATE INDEX metric_dimensions_thread_idx ON metric_dimensions (project_id, thread_id) WHERE thread_id IS NOT NULL;
CREATE INDEX metric_dimensions_user_idx ON metric_dimensions (project_id, user_id) WHERE user_id IS NOT NULL;
CREATE INDEX metric_dimensions_organization_idx ON metric_dimensions (project_id, organization_id) WHERE organization_id IS NOT NULL;
CREATE INDEX metric_dimensions_session_idx ON metric_dimensions (project_id, session_id) WHERE session_id IS NOT NULL;

-- The project-wide cubes, in minute, hour and day buckets (UTC): granularity m/h/d over the
-- low-cardinality dimensions (entity, provider, model, cost unit, environment, service), and
-- mu/hu/du over the cost unit alone, for the common query with no dimension filter or group (a
-- 30-day hourly series then reads 720 buckets × units instead of × every dimension combination). `name` is the metric's id in
-- libs/metrics/src/metric-names.ts (never renumbered). `sum` is numeric so that sums do not depend
-- on the order events were added in (a replay gives the same digits). `cost_unit` repeats the
-- dimension's, so that a query that neither filters nor groups on dimensions needs no join.
CREATE TABLE metric_rollups (
  project_id   text NOT NULL,
  granularity  text NOT NULL CHECK (granularity IN ('m', 'h', 'd', 'mu', 'hu', 'du')),
  name         smallint NOT NULL,
  bucket_start timestamptz(3) NOT NULL,
  dims_id      bigint NOT NULL,
  cost_unit    text,
  count        bigint NOT NULL,
  sum          numeric NOT NULL,
  min          double precision NOT NULL,
  max          double precision NOT NULL,
  cost_micros  bigint NOT NULL,
  cost_count   bigint NOT NULL,
  PRIMARY KEY (project_id, granularity, name, bucket_start, dims_id)
);

-- The scoped cube: the same plus resource, thread, user, organization and session ids, in hour
-- buckets only (scope ids multiply rows; a minute cube of them would be as large as the log).
-- Looked up through metric_dimensions' scope indexes, hence dims_id first.
CREATE TABLE metric_scope_rollups (
  project_id   text NOT NULL,
  dims_id      bigint NOT NULL,
  name         smallint NOT NULL,
  bucket_start timestamptz(3) NOT NULL,
  count        bigint NOT NULL,
  sum          numeric NOT NULL,
  min          double precision NOT NULL,
  max          double precision NOT NULL,
  cost_micros  bigint NOT NULL,
  cost_count   bigint NOT NULL,
  PRIMARY KEY (project_id, dims_id, name, bucket_start)
);
