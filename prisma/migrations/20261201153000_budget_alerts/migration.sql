-- Budget alerts (BudgetThresholdCrossed, BudgetExhausted). A policy names its thresholds in
-- percent of its limits, and the hysteresis (points below a threshold a rolling window must fall
-- before the threshold alerts again; NULL: 5).
ALTER TABLE policies ADD COLUMN alerts double precision[] NOT NULL DEFAULT '{}';
ALTER TABLE policies ADD COLUMN alert_hysteresis double precision;

-- One row per (scope key, window, source, limit type, kind, threshold) that ever alerted: whether
-- it is fired (waiting to fall back by the hysteresis) or armed again. Changed only under the
-- scope's alert lock (ingest, reprice) or by a conditional update (the guard's BudgetExhausted),
-- so 64 agents racing across a threshold write one event. The limit is kept with the row, so a
-- fired row can be re-armed without the rule that fired it (a request's limit, a deleted policy).
CREATE TABLE budget_alert_states (
  project_id  text             NOT NULL,
  scope_key   text             NOT NULL,
  "window"    text             NOT NULL,
  source      text             NOT NULL,
  limit_type  text             NOT NULL,
  kind        text             NOT NULL,
  threshold   double precision NOT NULL,
  limit_value bigint           NOT NULL,
  unit        text             NOT NULL,
  hysteresis  double precision NOT NULL,
  fired       boolean          NOT NULL,
  fired_count integer          NOT NULL DEFAULT 0,
  fired_at    timestamptz,
  updated_at  timestamptz      NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, scope_key, "window", source, limit_type, kind, threshold)
);

-- GET /v1/alerts and the dashboard's alerts list, newest first.
CREATE INDEX events_budget_alerts_idx ON events (project_id, occurred_at) WHERE type IN ('BudgetThresholdCrossed', 'BudgetExhausted');

-- Slack incoming webhooks are an exporter kind (alerts only, by default).
ALTER TABLE exporters DROP CONSTRAINT exporters_type_check;
ALTER TABLE exporters ADD CONSTRAINT exporters_type_check CHECK (type IN ('webhook', 'otlp', 'slack'));
