import { RUN_ID, SCOPE_TABLE, WINDOWED_SCOPES } from '@tollgate/contracts';
import { onStepsByTime, type Sql } from '@tollgate/database';

/** Which step events to list; every field narrows (AND). Times are inclusive, as the metric routes count them. */
export interface StepFilter {
  from?: Date;
  to?: Date;
  provider?: string;
  model?: string;
  entityName?: string;
  resourceId?: string;
  userId?: string;
  threadId?: string;
  traceId?: string;
  organizationId?: string;
  sessionId?: string;
  environment?: string;
  tag?: string;
  /** true: only steps with no price now (after any reprice); false: only priced ones. */
  unpriced?: boolean;
}

/** Where a newest-first page stopped: the last step's (occurredAt, log position). */
export interface StepCursor {
  occurredAt: Date;
  position: bigint;
}

/** A reservation as the step that named it sees it. */
export interface StepReservation {
  id: string;
  /** open, settled, released or lapsed (now). */
  status: string;
  reservedAt: string;
  expiresAt: string;
  /** When it was settled, released or lapsed. */
  closedAt: string | null;
  reserved: { cost: number | null; costUnit: string | null; inputTokens: number; outputTokens: number };
  /** The step event whose usage replaced the estimate (the first that named it); null while not settled. */
  settledByEventId: string | null;
  /** This step's actual usage passed what was reserved (tokens, or cost in the same unit). */
  exceeded: boolean;
}

/** One step event of the log, as the API shows it. */
export interface StepView {
  eventId: string;
  occurredAt: string;
  recordedAt: string;
  scopes: Record<string, string>;
  entityType: string | null;
  entityName: string | null;
  provider: string | null;
  model: string | null;
  environment: string | null;
  serviceName: string | null;
  tags: string[];
  /** inputTokens includes cacheReadTokens and cacheWriteTokens; cacheWriteTokens includes cacheWrite1hTokens; outputTokens includes reasoningTokens. */
  usage: {
    inputTokens: number;
    cacheReadTokens: number;
    cacheWriteTokens: number;
    cacheWrite1hTokens: number;
    outputTokens: number;
    reasoningTokens: number;
    totalTokens: number;
  };
  durationMs: number | null;
  finishReason: string | null;
  stepIndex: number | null;
  /** The step's cost now: its own, or its latest correction's (StepRepriced); null when it has no price. */
  cost: number | null;
  costUnit: string | null;
  costSource: string | null;
  repriced: boolean;
  unpriced: boolean;
  reservation: StepReservation | null;
}

/** A guard event of a run: a denial or warning (GuardDecided), or a reservation (BudgetReserved). */
export interface RunGuardEvent {
  kind: 'decision' | 'reservation';
  eventId: string;
  occurredAt: string;
  entityName: string | null;
  /** GuardDecided: the decision and its findings. */
  decision?: 'allow' | 'deny';
  violations?: unknown[];
  warnings?: unknown[];
  /** The check's stepId (both kinds), when it gave one. */
  stepId: string | null;
  /** BudgetReserved: what was held. */
  reservation?: {
    id: string;
    cost: number | null;
    costUnit: string | null;
    inputTokens: number;
    outputTokens: number;
    scopeKeys: string[];
    expiresAt: string;
  };
}

// A step's ids, field → column: the trace, run and span, then the windowed scopes' ids (the scope table's).
const SCOPE_COLUMNS: Record<string, string> = {
  [SCOPE_TABLE.run.field]: SCOPE_TABLE.run.column,
  [RUN_ID.field]: RUN_ID.column,
  spanId: 'span_id',
  ...Object.fromEntries(WINDOWED_SCOPES.map((s) => [SCOPE_TABLE[s].field, SCOPE_TABLE[s].column])),
};

/**
 * A step with its current cost and its reservation. The cost is the step's own unless a reprice
 * appended corrections: then the latest correction's new cost (corrections carry the step's
 * occurredAt, so the lookup stays in its partition and on events_step_repriced_idx). The
 * reservation comes from the reservations table; who settled it from its ReservationSettled event
 * (events_reservation_settled_idx).
 */
const STEP_SELECT = `
  e.position::text AS position, e.event_id, e.occurred_at, e.recorded_at, ${Object.values(SCOPE_COLUMNS)
    .map((c) => `e.${c}`)
    .join(', ')},
  e.entity_type, e.entity_name, e.provider, e.model, e.environment, e.service_name, e.tags,
  e.input_tokens::float8 AS input_tokens, e.output_tokens::float8 AS output_tokens, e.cache_read_tokens::float8 AS cache_read_tokens,
  e.cache_write_tokens::float8 AS cache_write_tokens, e.cache_write_1h_tokens::float8 AS cache_write_1h_tokens, e.reasoning_tokens::float8 AS reasoning_tokens,
  e.duration_ms, e.finish_reason, e.step_index, e.reservation_id,
  CASE WHEN rp.data IS NULL THEN e.cost_micros::float8 ELSE (rp.data->'new'->>'costMicros')::float8 END AS cost_micros,
  CASE WHEN rp.data IS NULL THEN e.cost_unit ELSE rp.data->'new'->>'costUnit' END AS cost_unit,
  CASE WHEN rp.data IS NULL THEN e.cost_source ELSE rp.data->'new'->>'source' END AS cost_source,
  rp.data IS NOT NULL AS repriced,
  r.status AS r_status, r.cost_micros::float8 AS r_cost, r.cost_unit AS r_unit, r.input_tokens::float8 AS r_in, r.output_tokens::float8 AS r_out,
  r.created_at AS r_at, r.expires_at AS r_expires, r.closed_at AS r_closed, st.data->>'stepEventId' AS r_settled_by`;

const STEP_JOINS = `
  LEFT JOIN LATERAL (
    SELECT c.data FROM events c
     WHERE c.project_id = e.project_id AND c.type = 'StepRepriced' AND c.data->>'stepEventId' = e.event_id AND c.occurred_at = e.occurred_at
     ORDER BY (c.data->>'sequence')::int DESC LIMIT 1
  ) rp ON true
  LEFT JOIN reservations r ON e.reservation_id IS NOT NULL AND r.project_id = e.project_id AND r.id = e.reservation_id
  LEFT JOIN LATERAL (
    SELECT s.data FROM events s
     WHERE s.project_id = e.project_id AND s.type = 'ReservationSettled' AND s.reservation_id = e.reservation_id
     LIMIT 1
  ) st ON e.reservation_id IS NOT NULL`;

const FILTER_COLUMNS: [keyof StepFilter, string][] = [
  ['provider', 'provider'],
  ['model', 'model'],
  ['entityName', 'entity_name'],
  ['resourceId', 'resource_id'],
  ['userId', 'user_id'],
  ['threadId', 'thread_id'],
  ['traceId', 'trace_id'],
  ['organizationId', 'organization_id'],
  ['sessionId', 'session_id'],
  ['environment', 'environment'],
];

class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

function whereOf(projectId: string, f: StepFilter, p: Params): string[] {
  const where = [`e.project_id = ${p.add(projectId)}`, `e.type = 'StepUsageRecorded'`, onStepsByTime('e')];
  if (f.from) where.push(`e.occurred_at >= ${p.add(f.from)}`);
  if (f.to) where.push(`e.occurred_at <= ${p.add(f.to)}`);
  for (const [field, col] of FILTER_COLUMNS) if (f[field] !== undefined) where.push(`e.${col} = ${p.add(f[field])}`);
  if (f.tag !== undefined) where.push(`${p.add(f.tag)}::text = ANY (e.tags)`);
  return where;
}

const micros = (v: unknown) => (v === null || v === undefined ? null : Number(v) / 1e6);
const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null);

function stepView(r: Record<string, any>): StepView {
  const scopes: Record<string, string> = {};
  for (const [field, col] of Object.entries(SCOPE_COLUMNS)) if (r[col] !== null) scopes[field] = r[col];
  const cost = micros(r.cost_micros);
  const costUnit = cost === null ? null : (r.cost_unit ?? null);
  let reservation: StepReservation | null = null;
  if (r.reservation_id && r.r_status) {
    const rUnit = r.r_unit || null;
    reservation = {
      id: r.reservation_id,
      status: r.r_status,
      reservedAt: iso(r.r_at)!,
      expiresAt: iso(r.r_expires)!,
      closedAt: iso(r.r_closed),
      reserved: { cost: rUnit ? micros(r.r_cost) : null, costUnit: rUnit, inputTokens: r.r_in, outputTokens: r.r_out },
      settledByEventId: r.r_settled_by ?? null,
      // The rule the settlement applies (insert-step-events.sql): tokens always, money only in one unit.
      exceeded:
        r.input_tokens > r.r_in ||
        r.output_tokens > r.r_out ||
        (cost !== null && costUnit === rUnit && Number(r.cost_micros) > Number(r.r_cost)),
    };
  }
  return {
    eventId: r.event_id,
    occurredAt: iso(r.occurred_at)!,
    recordedAt: iso(r.recorded_at)!,
    scopes,
    entityType: r.entity_type,
    entityName: r.entity_name,
    provider: r.provider,
    model: r.model,
    environment: r.environment,
    serviceName: r.service_name,
    tags: r.tags ?? [],
    usage: {
      inputTokens: r.input_tokens,
      cacheReadTokens: r.cache_read_tokens,
      cacheWriteTokens: r.cache_write_tokens,
      cacheWrite1hTokens: r.cache_write_1h_tokens,
      outputTokens: r.output_tokens,
      reasoningTokens: r.reasoning_tokens,
      totalTokens: r.input_tokens + r.output_tokens,
    },
    durationMs: r.duration_ms === null ? null : Number(r.duration_ms),
    finishReason: r.finish_reason,
    stepIndex: r.step_index,
    cost,
    costUnit,
    costSource: cost === null ? null : r.cost_source,
    repriced: r.repriced,
    unpriced: cost === null,
    reservation,
  };
}

/**
 * A page of step events, newest first (occurredAt, then log position), after `cursor`. Returns
 * the cursor of the next page, or null on the last one.
 */
export async function readSteps(
  db: Sql,
  projectId: string,
  filter: StepFilter,
  limit: number,
  cursor?: StepCursor,
): Promise<{ steps: StepView[]; next: StepCursor | null }> {
  const p = new Params();
  const where = whereOf(projectId, filter, p);
  if (cursor) {
    const at = p.add(cursor.occurredAt);
    // The first bound lets the (project_id, occurred_at) index start at the cursor.
    where.push(
      `e.occurred_at <= ${at}`,
      `(e.occurred_at, e.position) < (${at}::timestamptz, ${p.add(cursor.position.toString())}::bigint)`,
    );
  }
  // Unpriced is the step's state now, after reprices: the lateral join decides it.
  if (filter.unpriced !== undefined) {
    where.push(
      `((CASE WHEN rp.data IS NULL THEN e.cost_micros IS NULL ELSE rp.data->'new'->>'costMicros' IS NULL END) = ${p.add(filter.unpriced)}::boolean)`,
    );
  }
  const rows = await db.query<Record<string, any>>(
    `SELECT ${STEP_SELECT} FROM events e ${STEP_JOINS}
      WHERE ${where.join(' AND ')}
      ORDER BY e.occurred_at DESC, e.position DESC
      LIMIT ${p.add(limit + 1)}`,
    ...p.values,
  );
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    steps: page.map(stepView),
    next: rows.length > limit ? { occurredAt: last.occurred_at, position: BigInt(last.position) } : null,
  };
}

/**
 * A run (its traceId): its steps and its guard events, each oldest first, up to `limit` of each.
 * `truncated` says a list was cut.
 */
export async function readRun(
  db: Sql,
  projectId: string,
  traceId: string,
  limit: number,
): Promise<{ steps: StepView[]; guard: RunGuardEvent[]; truncated: boolean }> {
  const [steps, guard] = await Promise.all([
    db.query<Record<string, any>>(
      `SELECT ${STEP_SELECT} FROM events e ${STEP_JOINS}
        WHERE e.project_id = $1 AND e.trace_id = $2 AND e.type = 'StepUsageRecorded'
        ORDER BY e.occurred_at, e.position LIMIT $3`,
      projectId,
      traceId,
      limit + 1,
    ),
    db.query<Record<string, any>>(
      `SELECT event_id, type, occurred_at, entity_name, reservation_id, data FROM events
        WHERE project_id = $1 AND trace_id = $2 AND type IN ('GuardDecided', 'BudgetReserved')
        ORDER BY occurred_at, position LIMIT $3`,
      projectId,
      traceId,
      limit + 1,
    ),
  ]);
  return {
    steps: steps.slice(0, limit).map(stepView),
    guard: guard.slice(0, limit).map((r): RunGuardEvent => {
      const base = {
        eventId: r.event_id,
        occurredAt: iso(r.occurred_at)!,
        entityName: r.entity_name,
        stepId: r.data?.stepId ?? null,
      };
      if (r.type === 'GuardDecided')
        return {
          kind: 'decision',
          ...base,
          decision: r.data.decision,
          violations: r.data.violations,
          warnings: r.data.warnings,
        };
      return {
        kind: 'reservation',
        ...base,
        reservation: {
          id: r.reservation_id,
          cost: r.data.costUnit ? r.data.estimatedCost : null,
          costUnit: r.data.costUnit ?? null,
          inputTokens: r.data.inputTokens,
          outputTokens: r.data.outputTokens,
          scopeKeys: r.data.scopeKeys,
          expiresAt: r.data.expiresAt,
        },
      };
    }),
    truncated: steps.length > limit || guard.length > limit,
  };
}

export interface ModelLatency {
  provider: string | null;
  model: string | null;
  /** Steps that reported a duration. */
  steps: number;
  p50: number;
  p95: number;
  max: number;
}

/**
 * durationMs p50 and p95 of each provider/model over the whole filter (not per bucket), by the
 * rule of the metric routes' percentiles: sorted[min(floor(p × n), n − 1)], no interpolation.
 * Slowest p95 first.
 */
export async function readLatency(
  db: Sql,
  projectId: string,
  filter: StepFilter,
  limit: number,
): Promise<ModelLatency[]> {
  const p = new Params();
  const where = whereOf(projectId, filter, p);
  const pick = (pc: number) =>
    `(array_agg(e.duration_ms ORDER BY e.duration_ms))[least(floor(${pc}::float8 * count(*))::int, count(*)::int - 1) + 1]`;
  const rows = await db.query<{
    provider: string | null;
    model: string | null;
    steps: number;
    p50: number;
    p95: number;
    max: number;
  }>(
    `SELECT e.provider, e.model, count(*)::int AS steps, ${pick(0.5)} AS p50, ${pick(0.95)} AS p95, max(e.duration_ms) AS max
       FROM events e
      WHERE ${where.join(' AND ')} AND e.duration_ms IS NOT NULL
      GROUP BY e.provider, e.model
      ORDER BY p95 DESC, e.provider, e.model
      LIMIT ${p.add(limit)}`,
    ...p.values,
  );
  return rows.map((r) => ({
    provider: r.provider,
    model: r.model,
    steps: r.steps,
    p50: Number(r.p50),
    p95: Number(r.p95),
    max: Number(r.max),
  }));
}
