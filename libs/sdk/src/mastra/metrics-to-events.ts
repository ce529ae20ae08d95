import { MAX_ID_LENGTH, MAX_TAGS } from '../../../contracts/src/step-event';
import { fromMastraUsageStats } from '../../../contracts/src/usage/normalize-usage';
import type { RecordStepEvent } from '../events/prepare-event';

/**
 * The fields of a Mastra metric record (`CreateMetricRecord` in `@mastra/core/storage`) that
 * matter for usage; Mastra's own records are assignable to it.
 */
export interface MastraMetricLike {
  name: string;
  value: number;
  timestamp: Date | string;
  traceId?: string | null;
  spanId?: string | null;
  runId?: string | null;
  threadId?: string | null;
  resourceId?: string | null;
  userId?: string | null;
  organizationId?: string | null;
  sessionId?: string | null;
  entityType?: string | null;
  entityName?: string | null;
  provider?: string | null;
  model?: string | null;
  environment?: string | null;
  serviceName?: string | null;
  tags?: string[] | null;
  metadata?: Record<string, unknown> | null;
}

type UsageField =
  | 'inputTokens'
  | 'outputTokens'
  | 'cacheReadTokens'
  | 'cacheWriteTokens'
  | 'audioInputTokens'
  | 'imageInputTokens'
  | 'reasoningTokens';

/** Mastra's token metric names (emitted per model generation span) and the usage field each fills. */
export const MASTRA_TOKEN_METRICS: Readonly<Record<string, UsageField>> = {
  mastra_model_total_input_tokens: 'inputTokens',
  mastra_model_total_output_tokens: 'outputTokens',
  mastra_model_input_cache_read_tokens: 'cacheReadTokens',
  mastra_model_input_cache_write_tokens: 'cacheWriteTokens',
  mastra_model_input_audio_tokens: 'audioInputTokens',
  mastra_model_input_image_tokens: 'imageInputTokens',
  mastra_model_output_reasoning_tokens: 'reasoningTokens',
};
const DURATION_METRIC = 'mastra_model_duration_ms';

const str = (v: string | null | undefined): string | undefined =>
  typeof v === 'string' && v.length > 0 ? v : undefined;
const id = (v: string | null | undefined): string | undefined => {
  const s = str(v);
  return s && s.length <= MAX_ID_LENGTH ? s : undefined;
};
const tokens = (v: number): number => (Number.isFinite(v) && v > 0 ? Math.round(v) : 0);

/**
 * Turns Mastra's model metrics into Tollgate step events: one event per model span (the token
 * metrics of one LLM call share its traceId and spanId). The event id is derived from the span,
 * so writing the same metrics twice records the step once. Metrics that are not model token or
 * duration metrics are ignored; a span with no total token metric yields no event.
 *
 * A span's usage is normalized like the SDK's other paths (`fromMastraUsageStats`): Mastra over
 * an AI SDK 5 Anthropic model reports an input total without the cache reads, so cache reads and
 * writes above the input total are added to it rather than cut to fit (and reasoning above the
 * output total likewise). Parts that fit their total are taken as included: the metrics do not
 * say which model spec produced them. The step processor (`TollgateStepProcessor`) sees the
 * model and its provider metadata, so it is exact in every case.
 */
export function metricsToStepEvents(metrics: readonly MastraMetricLike[]): RecordStepEvent[] {
  const groups = new Map<string, MastraMetricLike[]>();
  for (const m of metrics) {
    if (!(m.name in MASTRA_TOKEN_METRICS) && m.name !== DURATION_METRIC) continue;
    const ts = m.timestamp instanceof Date ? m.timestamp.toISOString() : String(m.timestamp);
    const key = m.spanId
      ? `${m.traceId ?? ''}/${m.spanId}`
      : `${m.traceId ?? m.runId ?? ''}/${ts}/${m.provider ?? ''}/${m.model ?? ''}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push(m);
  }
  const events: RecordStepEvent[] = [];
  for (const [key, group] of groups) {
    if (
      !group.some((m) => m.name === 'mastra_model_total_input_tokens' || m.name === 'mastra_model_total_output_tokens')
    )
      continue;
    const usage: Record<UsageField, number> = {
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      audioInputTokens: 0,
      imageInputTokens: 0,
      reasoningTokens: 0,
    };
    const seen = new Set<UsageField>();
    let durationMs: number | undefined;
    let latest = 0;
    for (const m of group) {
      const at = new Date(m.timestamp).getTime();
      if (Number.isFinite(at)) latest = Math.max(latest, at);
      if (m.name === DURATION_METRIC) {
        if (Number.isFinite(m.value) && m.value >= 0) durationMs = m.value;
        continue;
      }
      const field = MASTRA_TOKEN_METRICS[m.name];
      usage[field] += tokens(m.value);
      seen.add(field);
    }
    const detail = (field: UsageField) => (seen.has(field) ? usage[field] : undefined);
    const normalized = fromMastraUsageStats({
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      inputDetails: {
        cacheRead: detail('cacheReadTokens'),
        cacheWrite: detail('cacheWriteTokens'),
        audio: detail('audioInputTokens'),
        image: detail('imageInputTokens'),
      },
      outputDetails: { reasoning: detail('reasoningTokens') },
    }).usage;
    const first = group[0];
    const pick = <K extends keyof MastraMetricLike>(k: K) =>
      group.find((m) => m[k] !== undefined && m[k] !== null)?.[k];
    const traceId = id(pick('traceId') as string) ?? id(pick('runId') as string) ?? 'mastra-untraced';
    const spanId = id(first.spanId);
    const reservation = (pick('metadata') as Record<string, unknown> | undefined)?.['tollgateReservationId'];
    const tags = ((pick('tags') as string[] | undefined) ?? [])
      .filter((t) => typeof t === 'string' && t.length > 0 && t.length <= 128)
      .slice(0, MAX_TAGS);
    const event: RecordStepEvent = {
      eventId: `mastra:${key}`.slice(0, MAX_ID_LENGTH),
      occurredAt: new Date(latest || Date.now()).toISOString(),
      traceId,
      spanId,
      runId: id(pick('runId') as string),
      threadId: id(pick('threadId') as string),
      resourceId: id(pick('resourceId') as string),
      userId: id(pick('userId') as string),
      organizationId: id(pick('organizationId') as string),
      sessionId: id(pick('sessionId') as string),
      entityType: (str(pick('entityType') as string) ?? 'agent').slice(0, 64),
      entityName: id(pick('entityName') as string),
      provider: (str(pick('provider') as string) ?? 'unknown').slice(0, 128),
      model: (str(pick('model') as string) ?? 'unknown').slice(0, 256),
      usage: normalized,
      durationMs,
      reservationId: typeof reservation === 'string' ? id(reservation) : undefined,
      tags: tags.length ? tags : undefined,
      environment: str(pick('environment') as string)?.slice(0, 128),
      serviceName: str(pick('serviceName') as string)?.slice(0, 128),
    };
    for (const k of Object.keys(event) as (keyof RecordStepEvent)[]) if (event[k] === undefined) delete event[k];
    events.push(event);
  }
  return events;
}
