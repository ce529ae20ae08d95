-- Anthropic and Bedrock price a 1-hour prompt-cache write higher than a 5-minute one. A step's
-- 1-hour writes are stored as a part of cache_write_tokens (the rest are 5-minute writes), so that
-- a reprice prices them as ingest did. Added to the partitioned table, the column reaches every
-- attached partition; the constant default keeps it a catalog-only change (no rewrite).
ALTER TABLE events ADD COLUMN cache_write_1h_tokens bigint NOT NULL DEFAULT 0;

-- A project's own rate for 1-hour cache writes; null: its 5-minute cache-write rate.
ALTER TABLE price_overrides ADD COLUMN cache_write_1h_per_million numeric(18, 9);
