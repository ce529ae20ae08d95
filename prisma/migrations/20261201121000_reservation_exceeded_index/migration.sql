-- The dashboard's scope page lists the settlements that passed their reservation, newest first.
CREATE INDEX events_reservation_exceeded_idx ON events (project_id, occurred_at) WHERE type = 'ReservationExceeded';
