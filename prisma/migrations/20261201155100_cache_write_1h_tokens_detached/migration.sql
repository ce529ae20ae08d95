-- A month partition that retention detached but has not dropped yet (it drops it on its next run,
-- or attaches it back when the rollups have not read it all) did not get events'
-- cache_write_1h_tokens, and ATTACH PARTITION refuses a table whose columns differ. Such tables
-- get the column too (same name pattern as EventRetention's orphans).
DO $$
DECLARE t text;
BEGIN
  FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind = 'r' AND NOT c.relispartition AND c.relname ~ '^events_[0-9]{4}_[0-9]{2}$'
  LOOP
    EXECUTE format('ALTER TABLE %I ADD COLUMN IF NOT EXISTS cache_write_1h_tokens bigint NOT NULL DEFAULT 0', t);
  END LOOP;
END $$;
