/**
 * @tollgate/usage-metrics — Mastra-compatible metric queries over rollup projections of the event log.
 *
 * Shapes: see mastra-contract.ts. Projection: MetricsProjector (worker job `projections` /
 * `rollups.catch-up`, woken by ingest and every few seconds by a scheduler).
 *
 * Replay (`npm run tollgate -- replay metric_rollups`) rebuilds into the live tables: it empties
 * them and rewinds the checkpoint in one transaction, then catches up batch by batch under the
 * same row lock the worker uses. Queries stay exact throughout — events past the checkpoint are
 * read from the log — only slower until the rebuild is done; ingest goes on untouched. A shadow
 * table swapped at the end would keep queries fast during a rebuild, at the price of a second
 * checkpoint and a catch-up race at the swap: not worth it while a rebuild of a million events
 * takes about a minute.
 */
export { MastraObservabilityModule, MastraObservabilityHttpModule } from './mastra-observability.module';
export { MetricsProjector } from './projection/metrics-projector';
export { CATCH_UP_JOB } from './projection/wake-projector';
export { ROLLUP_PROJECTION } from './projection/rollup-store.sql';
export { MetricsReadDb } from './query/metrics-read-db';
export * from './mastra-contract';
