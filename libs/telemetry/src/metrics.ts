import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The service's one Prometheus registry and every metric object, defined here so that each
 * feature (ingest, guard, projections, exporters) imports the object and observes it, and
 * GET /metrics serves them all. Names follow Prometheus conventions: base units (seconds),
 * `_total` for counters.
 */
export const metricsRegistry = new Registry();
collectDefaultMetrics({ register: metricsRegistry, prefix: 'tollgate_' });
// prom-client's defaults include three gauges named like counters (`…_total`), which Prometheus
// tooling takes for counters (`promtool check metrics` reports them): each is the sum over `type` of
// the gauge of the same name without `_total` (`sum(tollgate_nodejs_active_handles)`), so they go.
for (const gauge of ['handles', 'requests', 'resources'])
  metricsRegistry.removeSingleMetric(`tollgate_nodejs_active_${gauge}_total`);

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

// Ingest --------------------------------------------------------------------------------------

/** Events appended to the log (rate() of it is ingest events/s). */
export const ingestEvents = new Counter({
  name: 'tollgate_ingest_events_total',
  help: 'Step events appended to the event log',
  registers: [metricsRegistry],
});

/** POST /v1/events request latency, by HTTP status. */
export const ingestBatchLatency = new Histogram({
  name: 'tollgate_ingest_batch_duration_seconds',
  help: 'Latency of one ingest request (a batch of 1..1000 events), by HTTP status',
  labelNames: ['status'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [metricsRegistry],
});

/** Ingest requests answered 503 at once because the instance was at capacity (bytes in flight, or the pool's queue). */
export const ingestShed = new Counter({
  name: 'tollgate_ingest_shed_total',
  help: 'Ingest requests refused with 503 + Retry-After before any work, by reason (bytes: INGEST_MAX_IN_FLIGHT_BYTES, pool: INGEST_MAX_POOL_WAITING)',
  labelNames: ['reason'] as const,
  registers: [metricsRegistry],
});

// Guard (observed by the guard feature) ------------------------------------------------------

/** Guard check latency; `outcome` is the decision (allow, deny, …) or `error`. */
export const guardLatency = new Histogram({
  name: 'tollgate_guard_check_duration_seconds',
  help: 'Latency of one guard check, by outcome',
  labelNames: ['outcome'] as const,
  buckets: [0.0005, ...LATENCY_BUCKETS],
  registers: [metricsRegistry],
});

/** Guard decisions by outcome (allow, deny, warn, busy, failmode_allow, failmode_deny, error). */
export const guardDecisions = new Counter({
  name: 'tollgate_guard_decisions_total',
  help: 'Guard decisions, by outcome',
  labelNames: ['outcome'] as const,
  registers: [metricsRegistry],
});

/** Usage statements the guard ran; below the checks when concurrent checks of one budget share reads. */
export const guardUsageReads = new Counter({
  name: 'tollgate_guard_usage_reads_total',
  help: 'Usage reads (one statement each) run by guard checks; concurrent checks of the same scopes share one',
  registers: [metricsRegistry],
});

/**
 * Reserving group commits by path: `one_trip` (decided on the usage its shapes' last commits left,
 * made exact under the locks in one round trip), `missed` (that usage had grown: nothing written,
 * decided again), `two_trips` (read under the locks, then written: denials, warnings, shapes not
 * yet known, misses).
 */
export const guardCommits = new Counter({
  name: 'tollgate_guard_commits_total',
  help: 'Reserving guard commits, by path (one_trip, missed, two_trips)',
  labelNames: ['path'] as const,
  registers: [metricsRegistry],
});

/** Settlements whose actual usage passed their reservation (a tokenizer or estimate undercounting). */
export const reservationsExceeded = new Counter({
  name: 'tollgate_reservations_exceeded_total',
  help: 'Reservations settled with more cost or tokens than they held',
  registers: [metricsRegistry],
});

/** Budget alerts appended to the log, by kind (BudgetThresholdCrossed, BudgetExhausted). */
export const alertsFired = new Counter({
  name: 'tollgate_alerts_fired_total',
  help: 'Budget alerts appended to the log, by kind',
  labelNames: ['kind'] as const,
  registers: [metricsRegistry],
});

/** Steps whose provider reported a cost of 0 although they used tokens (stored as reported, flagged). */
export const zeroCostSteps = new Counter({
  name: 'tollgate_zero_cost_steps_total',
  help: 'Step events with a provider-reported cost of 0 and tokens (flagged zeroCostWithTokens)',
  registers: [metricsRegistry],
});

/** Reserving checks waiting for their scope's group commit. */
export const guardQueueDepth = new Gauge({
  name: 'tollgate_guard_queue_depth',
  help: 'Reserving guard checks queued for a group commit',
  registers: [metricsRegistry],
});

// Projections (set by the projector) ---------------------------------------------------------

export const projectionLagEvents = new Gauge({
  name: 'tollgate_projection_lag_events',
  help: 'Events in the log after the projection checkpoint',
  labelNames: ['projection'] as const,
  registers: [metricsRegistry],
});

export const projectionLagSeconds = new Gauge({
  name: 'tollgate_projection_lag_seconds',
  help: 'Age of the oldest event the projection has not applied yet (0 when caught up)',
  labelNames: ['projection'] as const,
  registers: [metricsRegistry],
});

// Exporters ----------------------------------------------------------------------------------

export const exporterLagEvents = new Gauge({
  name: 'tollgate_exporter_lag_events',
  help: 'Log entries of the project after the exporter checkpoint (capped at 1,000,000)',
  labelNames: ['project', 'exporter'] as const,
  registers: [metricsRegistry],
});

export const exporterLagSeconds = new Gauge({
  name: 'tollgate_exporter_lag_seconds',
  help: 'Age of the oldest event the exporter has not delivered yet (0 when caught up)',
  labelNames: ['project', 'exporter'] as const,
  registers: [metricsRegistry],
});

export const exporterPaused = new Gauge({
  name: 'tollgate_exporter_paused',
  help: '1 when the exporter is paused (see GET /v1/exporters/:name for the reason)',
  labelNames: ['project', 'exporter'] as const,
  registers: [metricsRegistry],
});

export const deadLetterBatches = new Gauge({
  name: 'tollgate_exporter_dead_letter_batches',
  help: 'Batches in the exporter dead-letter set',
  labelNames: ['project', 'exporter'] as const,
  registers: [metricsRegistry],
});

export const deadLetterEvents = new Gauge({
  name: 'tollgate_exporter_dead_letter_events',
  help: 'Events in the exporter dead-letter set',
  labelNames: ['project', 'exporter'] as const,
  registers: [metricsRegistry],
});

/** Observed in the process that delivers (the worker). */
export const exporterBatches = new Counter({
  name: 'tollgate_exporter_batches_total',
  help: 'Batch delivery attempts, by exporter type and result (delivered, retry, dead_lettered)',
  labelNames: ['type', 'result'] as const,
  registers: [metricsRegistry],
});

export const exporterEvents = new Counter({
  name: 'tollgate_exporter_events_delivered_total',
  help: 'Events acknowledged by sinks (retried batches count again)',
  labelNames: ['type'] as const,
  registers: [metricsRegistry],
});

export const exporterBatchLatency = new Histogram({
  name: 'tollgate_exporter_batch_duration_seconds',
  help: 'Time a sink took to answer one batch, by exporter type',
  labelNames: ['type'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [metricsRegistry],
});

// Queues and the database --------------------------------------------------------------------

export const queueJobs = new Gauge({
  name: 'tollgate_queue_jobs',
  help: 'BullMQ jobs by queue and state (waiting, active, delayed, failed, …)',
  labelNames: ['queue', 'state'] as const,
  registers: [metricsRegistry],
});

/** Incremented by the worker when a job attempt fails (including attempts that will be retried). */
export const queueFailures = new Counter({
  name: 'tollgate_queue_job_failures_total',
  help: 'Failed BullMQ job attempts, by queue',
  labelNames: ['queue'] as const,
  registers: [metricsRegistry],
});

export const dbPoolConnections = new Gauge({
  name: 'tollgate_db_pool_connections',
  help: 'PostgreSQL pool connections of this process: total, idle, and requests waiting for one',
  labelNames: ['state'] as const,
  registers: [metricsRegistry],
});
