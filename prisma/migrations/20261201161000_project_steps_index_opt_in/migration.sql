-- The (project, time) index of steps serves the metric queries, the steps list and reprice scans.
-- The guard's raw edge reads must go through their scope's own index: with statistics taken when
-- a project had one resource, their generic plan picked this index instead and walked every other
-- resource's steps of the hour (read-scope-usage.plan.int.spec.ts; bench:load measured 80–95 ms
-- per read). `position > 0` is always true; only the queries that state it (onStepsByTime in
-- libs/database/src/event-columns.ts) can use the index, and the guard's never do.
DROP INDEX IF EXISTS events_project_steps_idx;
CREATE INDEX events_project_steps_idx ON events (project_id, occurred_at) WHERE type IN ('StepUsageRecorded', 'StepRepriced') AND position > 0;
