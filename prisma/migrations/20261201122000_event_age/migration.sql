-- How many days back a project accepts events (at most the operator's INGEST_MAX_AGE_DAYS); null: the operator's.
ALTER TABLE projects ADD COLUMN max_event_age_days integer CHECK (max_event_age_days > 0);
