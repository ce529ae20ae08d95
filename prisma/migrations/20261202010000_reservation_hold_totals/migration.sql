-- What the open holds of each (project, scope key) add up to, per money unit: the guard read
-- every hold of a scope on every check, so a budget with many open reservations (many agents, or
-- one agent whose steps are not recorded yet) made each check cost O(its open holds). Every
-- statement that inserts or deletes holds adds or takes its rows here in the same statement
-- (hold-totals.sql.ts), so at any snapshot a total is the sum of the scope's holds. The guard reads
-- the total and takes out the holds that expired but are not swept yet: one row per unit plus
-- those, however many holds are open.
CREATE TABLE reservation_hold_totals (
  project_id    text   NOT NULL,
  scope_key     text   NOT NULL,
  cost_unit     text   NOT NULL,
  holds         bigint NOT NULL,
  cost_micros   bigint NOT NULL,
  input_tokens  bigint NOT NULL,
  output_tokens bigint NOT NULL,
  PRIMARY KEY (project_id, scope_key, cost_unit)
);

INSERT INTO reservation_hold_totals (project_id, scope_key, cost_unit, holds, cost_micros, input_tokens, output_tokens)
SELECT project_id, scope_key, cost_unit, count(*), sum(cost_micros), sum(input_tokens), sum(output_tokens)
  FROM reservation_holds
 GROUP BY project_id, scope_key, cost_unit;
