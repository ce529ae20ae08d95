-- The dashboard's run page (GET /v1/runs/:traceId) reads one run's steps and the guard's events
-- (reservations, denials and warnings) between them, oldest first, with no time range: without
-- this index it scanned every event of the project. Only those three types are indexed; nothing
-- on the guard's or the ingest's read path reads it.
CREATE INDEX events_run_idx ON events (project_id, trace_id, occurred_at)
  WHERE trace_id IS NOT NULL AND type IN ('StepUsageRecorded', 'GuardDecided', 'BudgetReserved');
