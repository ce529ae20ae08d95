-- Repricing stored steps (POST /v1/prices/reprice): a correction is a StepRepriced event stamped
-- with its step's occurred_at, so it lives in the step's partition and is dropped with it.

-- A step's latest cost is its own or its last correction's: corrections are found by the step's
-- event id, within the step's occurred_at (which prunes the partitions).
CREATE INDEX events_step_repriced_idx ON events (project_id, ((data ->> 'stepEventId')), occurred_at) WHERE type = 'StepRepriced';

-- A model's first override defaults to the project's earliest unpriced step of it: unpriced steps
-- are few, so that look-up reads only them.
CREATE INDEX events_unpriced_steps_idx ON events (project_id, occurred_at) WHERE unpriced AND type = 'StepUsageRecorded';
