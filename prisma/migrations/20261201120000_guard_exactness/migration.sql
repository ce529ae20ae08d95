-- The guard holds under every condition (issue 13): units of money, unpriced models, learned
-- tokenizer margins, settlements bound to their reservation's scopes.

-- A project's cost unit (limits without one are in it), its rates to that unit (the value of one
-- unit of another currency, in the project's unit), and what unpriced usage costs a cost budget.
-- New projects deny cost-limited steps they cannot price: an unknown model is never free.
ALTER TABLE projects DROP CONSTRAINT IF EXISTS projects_unpriced_policy_check;
ALTER TABLE projects ADD CONSTRAINT projects_unpriced_policy_check CHECK (unpriced_policy IN ('count_tokens', 'deny', 'fallback'));
ALTER TABLE projects ALTER COLUMN unpriced_policy SET DEFAULT 'deny';
ALTER TABLE projects ADD COLUMN cost_unit text NOT NULL DEFAULT 'USD';
ALTER TABLE projects ADD COLUMN exchange_rates jsonb NOT NULL DEFAULT '{}';
-- { "inputPerMillion": n, "outputPerMillion": n, "currency": "USD" } for unpriced_policy 'fallback'.
ALTER TABLE projects ADD COLUMN unpriced_fallback jsonb;

-- A stored budget's unit; null means the project's.
ALTER TABLE policies ADD COLUMN cost_unit text;

-- What a reservation was made for: the scope ids of the step's context (a settling event must
-- carry the same), and the estimate before the margin, so settlements teach the margin.
ALTER TABLE reservations ADD COLUMN context_keys text[] NOT NULL DEFAULT '{}';
ALTER TABLE reservations ADD COLUMN provider text;
ALTER TABLE reservations ADD COLUMN model text;
ALTER TABLE reservations ADD COLUMN estimated_input_tokens bigint;

-- Actual ÷ estimated input tokens of settled reservations, per project, provider and model, as a
-- histogram (bin b holds ratios in [0.5 + 0.05 b, 0.5 + 0.05 (b + 1)), the last bin everything above).
CREATE TABLE estimate_ratio_bins (
  project_id text     NOT NULL,
  provider   text     NOT NULL,
  model      text     NOT NULL,
  bin        smallint NOT NULL,
  n          bigint   NOT NULL,
  PRIMARY KEY (project_id, provider, model, bin)
);
