import { onStepsByTime, type Sql } from '@tollgate/database';

/**
 * `normalizeProvider` (pricing/price-step.ts) as SQL over a column: lower case, up to the first
 * `.`, `/` or `:`, Vertex is Google. A spec checks the two agree.
 */
export const normalizedProviderSql = (col: string) =>
  `(CASE regexp_replace(lower(${col}), '[./:].*$', '') WHEN 'google-vertex' THEN 'google' WHEN 'vertex' THEN 'google' ELSE regexp_replace(lower(${col}), '[./:].*$', '') END)`;

/** `normalizeModel` as SQL: the model without a leading `<provider>/`. */
export const normalizedModelSql = (providerCol: string, modelCol: string) =>
  `(CASE WHEN starts_with(lower(${modelCol}), ${normalizedProviderSql(providerCol)} || '/') THEN substr(${modelCol}, length(${normalizedProviderSql(providerCol)}) + 2) ELSE ${modelCol} END)`;

/**
 * The latest cost of each step `s` as `l`: its own (sequence 0) or that of its last correction.
 * Corrections carry the step's occurred_at, so the look-up prunes to the step's partition.
 */
export const LATEST_COST_SQL = `CROSS JOIN LATERAL (
    SELECT * FROM (
      SELECT 0 AS sequence, s.cost_micros, s.input_cost_micros, s.output_cost_micros, s.cost_unit, s.cost_source, s.price_id, s.unpriced
      UNION ALL
      SELECT (c.data ->> 'sequence')::int, c.cost_micros, c.input_cost_micros, c.output_cost_micros, c.cost_unit, c.cost_source, c.price_id, c.unpriced
        FROM events c
       WHERE c.project_id = s.project_id AND c.type = 'StepRepriced' AND (c.data ->> 'stepEventId') = s.event_id AND c.occurred_at = s.occurred_at
    ) v ORDER BY sequence DESC LIMIT 1) l`;

/** Which steps a reprice reads: `[from, to)`, optionally one provider (normalized) and model. */
export interface StepRange {
  from: Date;
  to: Date;
  /** Normalized (normalizeProvider). */
  provider?: string;
  /** Normalized (normalizeModel). */
  model?: string;
}

/** A stored step with its raw usage and its latest cost. */
export interface StepWithCost {
  position: string;
  eventId: string;
  occurredAt: Date;
  provider: string;
  model: string;
  usage: {
    inputTokens: number;
    outputTokens: number;
    cacheReadTokens: number;
    cacheWriteTokens: number;
    cacheWrite1hTokens: number;
    reasoningTokens: number;
    audioInputTokens: number;
    imageInputTokens: number;
  };
  /** The step came with a provider-reported cost (never repriced). */
  providerReported: boolean;
  /** 0: the step's own cost; n: its n-th correction's. */
  sequence: number;
  latest: {
    costMicros: number | null;
    inputCostMicros: number | null;
    outputCostMicros: number | null;
    costUnit: string | null;
    source: string | null;
    priceId: string | null;
    unpriced: boolean;
  };
}

const FILTERS = (p: number) =>
  `s.project_id = $1 AND s.type = 'StepUsageRecorded' AND ${onStepsByTime('s')} AND s.occurred_at >= $2 AND s.occurred_at < $3
   AND ($${p}::text IS NULL OR ${normalizedProviderSql('s.provider')} = $${p}::text)
   AND ($${p + 1}::text IS NULL OR ${normalizedModelSql('s.provider', 's.model')} = $${p + 1}::text)`;

const BATCH_SQL = `SELECT s.position::text AS position, s.event_id, s.occurred_at, s.provider, s.model,
         s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens, s.cache_write_1h_tokens, s.reasoning_tokens, s.audio_input_tokens, s.image_input_tokens,
         coalesce(s.cost_source = 'provider', false) AS provider_reported,
         l.sequence, l.cost_micros, l.input_cost_micros, l.output_cost_micros, l.cost_unit, l.cost_source, l.price_id, l.unpriced
    FROM events s ${LATEST_COST_SQL}
   WHERE ${FILTERS(4)} AND (s.occurred_at, s.position) > ($6::timestamptz, $7::bigint)
   ORDER BY s.occurred_at, s.position
   LIMIT $8`;

const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));

/**
 * The next `limit` steps of a range after `after` (occurredAt, position), in that order, each with
 * its latest cost — keyset pagination, so a reprice's batches read every step of the range once.
 */
export async function readRepriceBatch(
  db: Sql,
  projectId: string,
  range: StepRange,
  after: { occurredAt: Date; position: string } | null,
  limit: number,
): Promise<StepWithCost[]> {
  const rows = await db.query<Record<string, unknown>>(
    BATCH_SQL,
    projectId,
    range.from,
    range.to,
    range.provider ?? null,
    range.model ?? null,
    after?.occurredAt ?? range.from,
    after?.position ?? '-1',
    limit,
  );
  return rows.map((r) => ({
    position: r.position as string,
    eventId: r.event_id as string,
    occurredAt: r.occurred_at as Date,
    provider: r.provider as string,
    model: r.model as string,
    usage: {
      inputTokens: Number(r.input_tokens),
      outputTokens: Number(r.output_tokens),
      cacheReadTokens: Number(r.cache_read_tokens),
      cacheWriteTokens: Number(r.cache_write_tokens),
      cacheWrite1hTokens: Number(r.cache_write_1h_tokens),
      reasoningTokens: Number(r.reasoning_tokens),
      audioInputTokens: Number(r.audio_input_tokens),
      imageInputTokens: Number(r.image_input_tokens),
    },
    providerReported: r.provider_reported as boolean,
    sequence: Number(r.sequence),
    latest: {
      costMicros: n(r.cost_micros),
      inputCostMicros: n(r.input_cost_micros),
      outputCostMicros: n(r.output_cost_micros),
      costUnit: (r.cost_unit as string | null) ?? null,
      source: (r.cost_source as string | null) ?? null,
      priceId: (r.price_id as string | null) ?? null,
      unpriced: r.unpriced as boolean,
    },
  }));
}

/** How many steps a range holds (a reprice's progress total). */
export async function countRangeSteps(db: Sql, projectId: string, range: StepRange): Promise<number> {
  const [row] = await db.query<{ n: string }>(
    `SELECT count(*) AS n FROM events s WHERE ${FILTERS(4)}`,
    projectId,
    range.from,
    range.to,
    range.provider ?? null,
    range.model ?? null,
  );
  return Number(row.n);
}

/**
 * The stored steps an override would price, but whose latest cost has another price (or, when
 * `includeOwn`, any price — the override's own rates changed): their count and the last one's
 * occurredAt. A provider-reported cost is never repriced, so it is not counted.
 */
export async function stepsPricedOtherwise(
  db: Sql,
  projectId: string,
  q: { provider: string; model: string; from: Date; to: Date | null; priceId: string; includeOwn: boolean },
): Promise<{ steps: number; last: Date | null }> {
  const [row] = await db.query<{ n: string; last: Date | null }>(
    `SELECT count(*) AS n, max(s.occurred_at) AS last
       FROM events s ${LATEST_COST_SQL}
      WHERE ${FILTERS(4)} AND coalesce(s.cost_source, '') <> 'provider'
        AND (l.price_id IS DISTINCT FROM $6::text OR $7::boolean)`,
    projectId,
    q.from,
    q.to ?? 'infinity',
    q.provider,
    q.model,
    q.priceId,
    q.includeOwn,
  );
  return { steps: Number(row.n), last: row.last };
}

/** The occurredAt of the project's earliest step of a model that is still unpriced, since `since`. */
export async function earliestUnpricedStep(
  db: Sql,
  projectId: string,
  q: { provider: string; model: string; since: Date },
): Promise<Date | null> {
  const [row] = await db.query<{ at: Date | null }>(
    `SELECT s.occurred_at AS at
       FROM events s ${LATEST_COST_SQL}
      WHERE ${FILTERS(4)} AND s.unpriced AND l.unpriced
      ORDER BY s.occurred_at
      LIMIT 1`,
    projectId,
    q.since,
    'infinity',
    q.provider,
    q.model,
  );
  return row?.at ?? null;
}
