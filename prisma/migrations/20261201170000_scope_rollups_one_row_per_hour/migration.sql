-- The scoped cube kept one row per metric, so a step added to about six rows of it, each an index
-- entry of its own: most of the projector's time went to those upserts (bench:metrics' keep-up
-- line). It now keeps one row per (dimension tuple, hour), every metric's measures in columns of
-- that row, numbered by the metric ids of libs/usage-metrics/src/metric-names.ts (a new metric
-- adds its columns here and a line to the view). Only the metrics that carry a cost (the input and
-- output totals) have cost columns; the others' cost is 0. A metric whose count is NULL or 0 has
-- no record in that hour (a correction can take a cell's last record out).
--
-- metric_scope_rollups stays, as a view with its old shape (one row per metric), so every read
-- of it is unchanged. The projector writes metric_scope_hours (rollup-store.sql.ts).
CREATE TABLE metric_scope_hours (
  project_id   text NOT NULL,
  dims_id      bigint NOT NULL,
  bucket_start timestamptz(3) NOT NULL,
  count_1 bigint, sum_1 numeric, min_1 double precision, max_1 double precision, cost_micros_1 bigint, cost_count_1 bigint,
  count_2 bigint, sum_2 numeric, min_2 double precision, max_2 double precision, cost_micros_2 bigint, cost_count_2 bigint,
  count_3 bigint, sum_3 numeric, min_3 double precision, max_3 double precision,
  count_4 bigint, sum_4 numeric, min_4 double precision, max_4 double precision,
  count_5 bigint, sum_5 numeric, min_5 double precision, max_5 double precision,
  count_6 bigint, sum_6 numeric, min_6 double precision, max_6 double precision,
  count_7 bigint, sum_7 numeric, min_7 double precision, max_7 double precision,
  count_8 bigint, sum_8 numeric, min_8 double precision, max_8 double precision,
  count_9 bigint, sum_9 numeric, min_9 double precision, max_9 double precision,
  count_10 bigint, sum_10 numeric, min_10 double precision, max_10 double precision,
  count_11 bigint, sum_11 numeric, min_11 double precision, max_11 double precision,
  count_12 bigint, sum_12 numeric, min_12 double precision, max_12 double precision,
  PRIMARY KEY (project_id, dims_id, bucket_start)
);

INSERT INTO metric_scope_hours (project_id, dims_id, bucket_start, count_1, sum_1, min_1, max_1, cost_micros_1, cost_count_1, count_2, sum_2, min_2, max_2, cost_micros_2, cost_count_2, count_3, sum_3, min_3, max_3, count_4, sum_4, min_4, max_4, count_5, sum_5, min_5, max_5, count_6, sum_6, min_6, max_6, count_7, sum_7, min_7, max_7, count_8, sum_8, min_8, max_8, count_9, sum_9, min_9, max_9, count_10, sum_10, min_10, max_10, count_11, sum_11, min_11, max_11, count_12, sum_12, min_12, max_12)
SELECT project_id, dims_id, bucket_start,
       sum(count) FILTER (WHERE name = 1), sum(sum) FILTER (WHERE name = 1), min(min) FILTER (WHERE name = 1), max(max) FILTER (WHERE name = 1), sum(cost_micros) FILTER (WHERE name = 1), sum(cost_count) FILTER (WHERE name = 1),
       sum(count) FILTER (WHERE name = 2), sum(sum) FILTER (WHERE name = 2), min(min) FILTER (WHERE name = 2), max(max) FILTER (WHERE name = 2), sum(cost_micros) FILTER (WHERE name = 2), sum(cost_count) FILTER (WHERE name = 2),
       sum(count) FILTER (WHERE name = 3), sum(sum) FILTER (WHERE name = 3), min(min) FILTER (WHERE name = 3), max(max) FILTER (WHERE name = 3),
       sum(count) FILTER (WHERE name = 4), sum(sum) FILTER (WHERE name = 4), min(min) FILTER (WHERE name = 4), max(max) FILTER (WHERE name = 4),
       sum(count) FILTER (WHERE name = 5), sum(sum) FILTER (WHERE name = 5), min(min) FILTER (WHERE name = 5), max(max) FILTER (WHERE name = 5),
       sum(count) FILTER (WHERE name = 6), sum(sum) FILTER (WHERE name = 6), min(min) FILTER (WHERE name = 6), max(max) FILTER (WHERE name = 6),
       sum(count) FILTER (WHERE name = 7), sum(sum) FILTER (WHERE name = 7), min(min) FILTER (WHERE name = 7), max(max) FILTER (WHERE name = 7),
       sum(count) FILTER (WHERE name = 8), sum(sum) FILTER (WHERE name = 8), min(min) FILTER (WHERE name = 8), max(max) FILTER (WHERE name = 8),
       sum(count) FILTER (WHERE name = 9), sum(sum) FILTER (WHERE name = 9), min(min) FILTER (WHERE name = 9), max(max) FILTER (WHERE name = 9),
       sum(count) FILTER (WHERE name = 10), sum(sum) FILTER (WHERE name = 10), min(min) FILTER (WHERE name = 10), max(max) FILTER (WHERE name = 10),
       sum(count) FILTER (WHERE name = 11), sum(sum) FILTER (WHERE name = 11), min(min) FILTER (WHERE name = 11), max(max) FILTER (WHERE name = 11),
       sum(count) FILTER (WHERE name = 12), sum(sum) FILTER (WHERE name = 12), min(min) FILTER (WHERE name = 12), max(max) FILTER (WHERE name = 12)
  FROM metric_scope_rollups
 GROUP BY project_id, dims_id, bucket_start;

DROP TABLE metric_scope_rollups;

CREATE VIEW metric_scope_rollups AS
SELECT h.project_id, h.dims_id, m.name, h.bucket_start, m.count, m.sum, m.min, m.max, m.cost_micros, m.cost_count
  FROM metric_scope_hours h
 CROSS JOIN LATERAL (VALUES
    (1::smallint, h.count_1, h.sum_1, h.min_1, h.max_1, h.cost_micros_1, h.cost_count_1),
    (2::smallint, h.count_2, h.sum_2, h.min_2, h.max_2, h.cost_micros_2, h.cost_count_2),
    (3::smallint, h.count_3, h.sum_3, h.min_3, h.max_3, 0::bigint, 0::bigint),
    (4::smallint, h.count_4, h.sum_4, h.min_4, h.max_4, 0::bigint, 0::bigint),
    (5::smallint, h.count_5, h.sum_5, h.min_5, h.max_5, 0::bigint, 0::bigint),
    (6::smallint, h.count_6, h.sum_6, h.min_6, h.max_6, 0::bigint, 0::bigint),
    (7::smallint, h.count_7, h.sum_7, h.min_7, h.max_7, 0::bigint, 0::bigint),
    (8::smallint, h.count_8, h.sum_8, h.min_8, h.max_8, 0::bigint, 0::bigint),
    (9::smallint, h.count_9, h.sum_9, h.min_9, h.max_9, 0::bigint, 0::bigint),
    (10::smallint, h.count_10, h.sum_10, h.min_10, h.max_10, 0::bigint, 0::bigint),
    (11::smallint, h.count_11, h.sum_11, h.min_11, h.max_11, 0::bigint, 0::bigint),
    (12::smallint, h.count_12, h.sum_12, h.min_12, h.max_12, 0::bigint, 0::bigint)
  ) AS m(name, count, sum, min, max, cost_micros, cost_count)
 WHERE m.count <> 0;
