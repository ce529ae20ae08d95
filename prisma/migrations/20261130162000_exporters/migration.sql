-- Exporters: per-project sinks fed from the event log, each with its own checkpoint.
CREATE TABLE exporters (
  id                   text PRIMARY KEY,
  project_id           text NOT NULL REFERENCES projects(id),
  name                 text NOT NULL,
  type                 text NOT NULL CHECK (type IN ('webhook', 'otlp')),
  -- Everything but the secrets, as validated by the API.
  settings             jsonb NOT NULL,
  -- AES-256-GCM sealed JSON (TOLLGATE_SECRET_KEY); null when the exporter has no secrets.
  secrets              text,
  status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
  paused_reason        text,
  consecutive_failures integer NOT NULL DEFAULT 0,
  -- The last log entry delivered or dead-lettered, in the readers' (tx, position) order. tx is an
  -- xid8 kept as text (Prisma has no xid8 type); every comparison casts it back to xid8.
  checkpoint_tx        text NOT NULL DEFAULT '0',
  checkpoint_position  bigint NOT NULL DEFAULT 0,
  -- The one batch of the stream being delivered, if any: never two per exporter.
  in_flight_batch      text,
  last_delivered_at    timestamptz(3),
  created_at           timestamptz(3) NOT NULL DEFAULT now(),
  updated_at           timestamptz(3) NOT NULL DEFAULT now(),
  UNIQUE (project_id, name)
);

-- Batches that are in flight, dead-lettered, or being retried from the dead-letter set. A batch
-- is a range of the log ((from, to] in (tx, position) order, for one project), re-read on each
-- attempt: the log is immutable, so a retry sends exactly the same events.
CREATE TABLE export_batches (
  id            text PRIMARY KEY,
  exporter_id   text NOT NULL REFERENCES exporters(id) ON DELETE CASCADE,
  status        text NOT NULL CHECK (status IN ('in_flight', 'dead', 'retrying')),
  from_tx       text NOT NULL,
  from_position bigint NOT NULL,
  to_tx         text NOT NULL,
  to_position   bigint NOT NULL,
  -- Log rows in the range (all types), and the events of it that the exporter sends.
  log_rows      integer NOT NULL,
  event_count   integer NOT NULL,
  attempts      integer NOT NULL DEFAULT 0,
  last_error    text,
  -- The BullMQ job currently carrying it (re-created if Redis lost it).
  job_id        text,
  created_at    timestamptz(3) NOT NULL DEFAULT now(),
  failed_at     timestamptz(3)
);
CREATE INDEX export_batches_exporter_status_idx ON export_batches (exporter_id, status);

-- Exporters read one project's log after their checkpoint in (tx, position) order. Without this
-- index that read walks every project's entries after the checkpoint.
CREATE INDEX events_project_tx_position_idx ON events (project_id, tx, position);
