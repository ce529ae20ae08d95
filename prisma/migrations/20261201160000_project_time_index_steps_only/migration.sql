-- The (project, time) index served the metric queries' raw reads, which read steps and their
-- corrections only, and it held every event. The guard's raw edge read of a hot scope could
-- pick it over the scope's own index (with one resource's statistics they look alike) and then
-- walked every BudgetReserved and GuardDecided of the hour: 20,000 rows filtered away per check
-- (read-scope-usage.plan.spec.ts). Indexed here, as in the per-scope indexes, are only the events
-- that carry usage; the other types that are read by time have their own partial indexes.
DROP INDEX IF EXISTS events_project_occurred_idx;
CREATE INDEX events_project_steps_idx ON events (project_id, occurred_at) WHERE type IN ('StepUsageRecorded', 'StepRepriced');
