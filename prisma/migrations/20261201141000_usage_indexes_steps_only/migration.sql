-- The guard's raw reads of a window's partial hours go through these per-scope indexes. They also
-- held the guard's own events (BudgetReserved, GuardDecided carry the scope ids), so a busy budget's
-- current hour grew one index entry and one heap visit per check, read again by every check
-- (bench:guard: PostgreSQL CPU per reserving check from 3 ms to 11 ms within a round). Only the
-- events that carry usage are indexed now.
DROP INDEX IF EXISTS events_thread_usage_idx;
DROP INDEX IF EXISTS events_resource_usage_idx;
DROP INDEX IF EXISTS events_user_usage_idx;
DROP INDEX IF EXISTS events_organization_usage_idx;
DROP INDEX IF EXISTS events_session_usage_idx;
CREATE INDEX events_thread_usage_idx ON events (project_id, thread_id, occurred_at) WHERE thread_id IS NOT NULL AND type IN ('StepUsageRecorded', 'StepRepriced');
CREATE INDEX events_resource_usage_idx ON events (project_id, resource_id, occurred_at) WHERE resource_id IS NOT NULL AND type IN ('StepUsageRecorded', 'StepRepriced');
CREATE INDEX events_user_usage_idx ON events (project_id, user_id, occurred_at) WHERE user_id IS NOT NULL AND type IN ('StepUsageRecorded', 'StepRepriced');
CREATE INDEX events_organization_usage_idx ON events (project_id, organization_id, occurred_at) WHERE organization_id IS NOT NULL AND type IN ('StepUsageRecorded', 'StepRepriced');
CREATE INDEX events_session_usage_idx ON events (project_id, session_id, occurred_at) WHERE session_id IS NOT NULL AND type IN ('StepUsageRecorded', 'StepRepriced');
