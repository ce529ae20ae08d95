-- GET /v1/steps and /v1/runs/:traceId show, for a step that named a reservation, which step event
-- settled it (ReservationSettled carries it). Looked up by reservation id: one entry per settled
-- reservation. (Since 20261201160000 the (project, time) index holds steps only, so the lookup
-- through event_ids' occurredAt would walk a whole partition.)
CREATE INDEX events_reservation_settled_idx ON events (project_id, reservation_id) WHERE type = 'ReservationSettled';
