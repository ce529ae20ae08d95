-- Inline projection the guard reads: per-scope usage in hour and day buckets (and one all-time
-- row per run), written in the same statement that appends the step event, so the guard sees a
-- step the moment it commits. cost_unit is '' for unpriced usage.
CREATE TABLE usage_counters (
  project_id      text        NOT NULL,
  scope           text        NOT NULL,
  scope_id        text        NOT NULL,
  granularity     "char"      NOT NULL, -- 'h' hour, 'd' day, 'r' the whole run
  bucket_start    timestamptz NOT NULL,
  cost_unit       text        NOT NULL,
  input_tokens    bigint      NOT NULL DEFAULT 0,
  output_tokens   bigint      NOT NULL DEFAULT 0,
  cost_micros     bigint      NOT NULL DEFAULT 0,
  unpriced_events bigint      NOT NULL DEFAULT 0,
  events          bigint      NOT NULL DEFAULT 0,
  PRIMARY KEY (project_id, scope, scope_id, granularity, bucket_start, cost_unit)
);

-- Window edges are exact to the event: the partial hours at both ends are summed from the log.
CREATE INDEX events_thread_usage_idx ON events (project_id, thread_id, occurred_at) WHERE thread_id IS NOT NULL;
CREATE INDEX events_resource_usage_idx ON events (project_id, resource_id, occurred_at) WHERE resource_id IS NOT NULL;
CREATE INDEX events_user_usage_idx ON events (project_id, user_id, occurred_at) WHERE user_id IS NOT NULL;
CREATE INDEX events_organization_usage_idx ON events (project_id, organization_id, occurred_at) WHERE organization_id IS NOT NULL;
CREATE INDEX events_session_usage_idx ON events (project_id, session_id, occurred_at) WHERE session_id IS NOT NULL;

-- Budget held for a step between its check and its step event (a lease that expires).
CREATE TABLE reservations (
  id            text        PRIMARY KEY,
  project_id    text        NOT NULL,
  step_id       text        NOT NULL,
  status        text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'settled', 'released', 'lapsed')),
  scope_keys    text[]      NOT NULL,
  cost_micros   bigint      NOT NULL,
  cost_unit     text        NOT NULL,
  input_tokens  bigint      NOT NULL,
  output_tokens bigint      NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  closed_at     timestamptz,
  UNIQUE (project_id, step_id)
);
CREATE INDEX reservations_open_scope_idx ON reservations USING gin (scope_keys) WHERE status = 'open';
CREATE INDEX reservations_open_expiry_idx ON reservations (expires_at) WHERE status = 'open';

-- Budgets stored per project, applied to every check of that project.
CREATE TABLE policies (
  project_id        text        NOT NULL REFERENCES projects(id),
  name              text        NOT NULL,
  scope             text        NOT NULL,
  "window"          text        NOT NULL,
  max_cost_micros   bigint,
  max_total_tokens  bigint,
  max_input_tokens  bigint,
  max_output_tokens bigint,
  warn_at_percent   double precision,
  strategy          text        NOT NULL DEFAULT 'block' CHECK (strategy IN ('block', 'warn')),
  entity_name       text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, name)
);

-- Audit of denials and warnings by scope.
CREATE INDEX events_guard_decided_idx ON events (project_id, occurred_at) WHERE type = 'GuardDecided';
