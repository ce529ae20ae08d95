-- The distributed-PostgreSQL path (README "Running at scale"): a table distributed by project_id
-- (e.g. on Citus) must carry project_id in its primary key and every unique index. These three
-- were keyed without it. project_id goes last, so lookups by the old key keep using the index
-- (and the log's key stays in position order for inserts). test/integration/distributed-postgres.spec.ts
-- checks every table of the schema.
ALTER TABLE events DROP CONSTRAINT events_pkey, ADD PRIMARY KEY (position, occurred_at, project_id);
ALTER TABLE reservations DROP CONSTRAINT reservations_pkey, ADD PRIMARY KEY (id, project_id);
ALTER TABLE metric_dimensions DROP CONSTRAINT metric_dimensions_pkey, ADD PRIMARY KEY (id, project_id);
