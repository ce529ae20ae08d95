-- What an open reservation holds, one row per scope it holds, in a btree the guard reads by
-- (project, scope key) and the reservation's expiry. It replaces the GIN index on
-- reservations.scope_keys: GIN searches scan its whole pending list and every dead entry (GIN has
-- no index-tuple killing), so with reservations churning and no vacuum each check grew slower.
-- A btree range scan skips expired holds, and settled or released ones are deleted.
CREATE TABLE reservation_holds (
  project_id     text        NOT NULL,
  scope_key      text        NOT NULL,
  expires_at     timestamptz NOT NULL,
  reservation_id text        NOT NULL,
  cost_micros    bigint      NOT NULL,
  cost_unit      text        NOT NULL,
  input_tokens   bigint      NOT NULL,
  output_tokens  bigint      NOT NULL,
  PRIMARY KEY (project_id, scope_key, expires_at, reservation_id)
);

INSERT INTO reservation_holds (project_id, scope_key, expires_at, reservation_id, cost_micros, cost_unit, input_tokens, output_tokens)
SELECT r.project_id, k.scope_key, r.expires_at, r.id, r.cost_micros, r.cost_unit, r.input_tokens, r.output_tokens
  FROM reservations r CROSS JOIN LATERAL unnest(r.scope_keys) AS k(scope_key)
 WHERE r.status = 'open'
ON CONFLICT DO NOTHING;

DROP INDEX IF EXISTS reservations_open_scope_idx;
