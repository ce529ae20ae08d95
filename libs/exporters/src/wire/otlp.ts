import { createHash } from 'node:crypto';
import { REPRICED_EVENT_TYPE, STEP_EVENT_TYPE, type WireEvent } from './wire-event';

/** OTLP/JSON AnyValue (int64 as a decimal string, as the protobuf JSON mapping writes it). */
type AnyValue =
  | { stringValue: string }
  | { intValue: string }
  | { doubleValue: number }
  | { boolValue: boolean }
  | { arrayValue: { values: AnyValue[] } };
export interface KeyValue {
  key: string;
  value: AnyValue;
}

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: KeyValue[];
  status: { code: number };
}

export interface OtlpTraces {
  resourceSpans: {
    resource: { attributes: KeyValue[] };
    scopeSpans: { scope: { name: string; version: string }; spans: OtlpSpan[] }[];
  }[];
}

const SPAN_KIND_INTERNAL = 1;
const SPAN_KIND_CLIENT = 3;
const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const isZero = (hex: string) => /^0+$/.test(hex);

const hexOf = (text: string, length: number) => createHash('sha256').update(text).digest('hex').slice(0, length);

/** The agent's trace id when it is a W3C one; otherwise a stable id derived from it. */
export function otlpTraceId(traceId: string | null, eventId: string): string {
  const t = (traceId ?? '').toLowerCase();
  if (HEX32.test(t) && !isZero(t)) return t;
  return hexOf(`trace:${traceId ?? eventId}`, 32);
}

type AttrValue = string | number | boolean | string[] | null | undefined;

function attrs(pairs: ([string, AttrValue] | [string, AttrValue, 'int' | 'double'])[]): KeyValue[] {
  const out: KeyValue[] = [];
  for (const [key, v, kind] of pairs) {
    if (v === null || v === undefined) continue;
    if (Array.isArray(v)) out.push({ key, value: { arrayValue: { values: v.map((s) => ({ stringValue: s })) } } });
    else if (typeof v === 'boolean') out.push({ key, value: { boolValue: v } });
    else if (typeof v === 'number')
      out.push({ key, value: kind === 'double' ? { doubleValue: v } : { intValue: String(Math.trunc(v)) } });
    else out.push({ key, value: { stringValue: v } });
  }
  return out;
}

const nanos = (ms: number) => (BigInt(Math.round(ms * 1000)) * 1000n).toString();

/**
 * One CLIENT span per step, with the OpenTelemetry GenAI semantic-convention attributes. The
 * span's id is derived from the event id (stable across retries, so a collector that sees a
 * retried batch gets the same span again); the agent's own span, when it sent a W3C one, is
 * the parent, so the usage span sits under the step it measures.
 */
export function toOtlpSpan(e: WireEvent): OtlpSpan {
  const end = Date.parse(e.occurredAt);
  const start = end - Math.max(0, e.durationMs ?? 0);
  const parent = (e.spanId ?? '').toLowerCase();
  // The step event does not name the operation; an LLM step is a chat completion.
  const operation = 'chat';
  const u = e.usage;
  return {
    traceId: otlpTraceId(e.traceId, e.eventId),
    spanId: stepSpanId(e.projectId, e.eventId),
    ...(HEX16.test(parent) && !isZero(parent) ? { parentSpanId: parent } : {}),
    name: `${operation} ${e.model ?? 'unknown'}`,
    kind: SPAN_KIND_CLIENT,
    startTimeUnixNano: nanos(start),
    endTimeUnixNano: nanos(end),
    status: { code: 0 },
    attributes: attrs([
      ['gen_ai.operation.name', operation],
      ['gen_ai.provider.name', e.provider],
      ['gen_ai.request.model', e.model],
      ['gen_ai.response.model', e.model],
      ['gen_ai.usage.input_tokens', u.inputTokens],
      ['gen_ai.usage.output_tokens', u.outputTokens],
      ['gen_ai.usage.cache_read.input_tokens', u.cacheReadTokens],
      ['gen_ai.usage.cache_creation.input_tokens', u.cacheWriteTokens],
      ['gen_ai.usage.reasoning.output_tokens', u.reasoningTokens],
      ['gen_ai.response.finish_reasons', e.finishReason ? [e.finishReason] : null],
      ['gen_ai.conversation.id', e.threadId],
      ['gen_ai.agent.name', e.entityType === 'agent' ? e.entityName : null],
      ['user.id', e.userId],
      ['session.id', e.sessionId],
      ['tollgate.project.id', e.projectId],
      ['tollgate.event.id', e.eventId],
      ['tollgate.event.position', e.position],
      ['tollgate.run.id', e.runId],
      ['tollgate.resource.id', e.resourceId],
      ['tollgate.organization.id', e.organizationId],
      ['tollgate.entity.type', e.entityType],
      ['tollgate.entity.name', e.entityName],
      ['tollgate.step.index', e.stepIndex],
      ['tollgate.reservation.id', e.reservationId],
      ['tollgate.cost.amount', e.cost ? e.cost.micros / 1_000_000 : null, 'double'],
      ['tollgate.cost.micros', e.cost?.micros],
      ['tollgate.cost.input_micros', e.cost?.inputMicros],
      ['tollgate.cost.output_micros', e.cost?.outputMicros],
      ['tollgate.cost.currency', e.cost?.currency],
      ['tollgate.cost.source', e.cost?.source],
      ['tollgate.cost.unpriced', e.unpriced],
      ['tollgate.tags', e.tags.length ? e.tags : null],
      ...Object.entries(e.labels ?? {}).map(
        ([k, v]) => [`tollgate.label.${k}`, typeof v === 'string' ? v : JSON.stringify(v)] as [string, string],
      ),
    ]),
  };
}

/** The usage span of a step (see toOtlpSpan): what a correction of its cost is a child of. */
const stepSpanId = (projectId: string, stepEventId: string) => hexOf(`span:${projectId}:${stepEventId}`, 16);

/**
 * A correction of a step's cost (StepRepriced), as a zero-length INTERNAL span under the step's
 * usage span, at the time it was recorded. Its costs are `tollgate.reprice.*`, never
 * `tollgate.cost.*`, so a collector that sums step costs does not count the step twice.
 */
export function toOtlpRepriceSpan(e: WireEvent): OtlpSpan {
  const at = nanos(Date.parse(e.recordedAt));
  const r = e.repriced;
  const stepEventId = r?.stepEventId ?? e.eventId;
  const before = r?.previousCost ?? null;
  const after = e.cost;
  // A delta in one unit; none when the correction moved the step from one unit to another.
  const delta = !before
    ? after
    : !after
      ? { micros: -before.micros, currency: before.currency }
      : after.currency === before.currency
        ? { micros: after.micros - before.micros, currency: after.currency }
        : null;
  return {
    traceId: otlpTraceId(e.traceId, stepEventId),
    spanId: hexOf(`span:${e.projectId}:${e.eventId}`, 16),
    parentSpanId: stepSpanId(e.projectId, stepEventId),
    name: `reprice ${e.model ?? 'unknown'}`,
    kind: SPAN_KIND_INTERNAL,
    startTimeUnixNano: at,
    endTimeUnixNano: at,
    status: { code: 0 },
    attributes: attrs([
      ['gen_ai.provider.name', e.provider],
      ['gen_ai.request.model', e.model],
      ['tollgate.project.id', e.projectId],
      ['tollgate.event.id', e.eventId],
      ['tollgate.event.position', e.position],
      ['tollgate.reprice.step_event_id', stepEventId],
      ['tollgate.reprice.sequence', r?.sequence],
      ['tollgate.reprice.cost.micros', e.cost?.micros],
      ['tollgate.reprice.cost.currency', e.cost?.currency],
      ['tollgate.reprice.cost.price_id', e.cost?.priceId],
      ['tollgate.reprice.previous_cost.micros', r?.previousCost?.micros],
      ['tollgate.reprice.previous_cost.currency', r?.previousCost?.currency],
      ['tollgate.reprice.previous_cost.price_id', r?.previousCost?.priceId],
      ['tollgate.reprice.delta.micros', delta?.micros],
      ['tollgate.reprice.delta.currency', delta?.currency],
    ]),
  };
}

/**
 * An ExportTraceServiceRequest in OTLP/JSON: step events, and corrections of their cost as child
 * spans (other log types have no span),
 * grouped into one resource per (service.name, deployment.environment.name).
 */
export function toOtlpTraces(events: WireEvent[], defaultServiceName: string, version = '0.1.0'): OtlpTraces {
  const groups = new Map<string, { service: string; environment: string | null; spans: OtlpSpan[] }>();
  for (const e of events) {
    if (e.type !== STEP_EVENT_TYPE && e.type !== REPRICED_EVENT_TYPE) continue;
    const service = e.serviceName ?? defaultServiceName;
    const key = JSON.stringify([service, e.environment]);
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { service, environment: e.environment, spans: [] }));
    group.spans.push(e.type === REPRICED_EVENT_TYPE ? toOtlpRepriceSpan(e) : toOtlpSpan(e));
  }
  return {
    resourceSpans: [...groups.values()].map((g) => ({
      resource: {
        attributes: attrs([
          ['service.name', g.service],
          ['deployment.environment.name', g.environment],
        ]),
      },
      scopeSpans: [{ scope: { name: 'tollgate', version }, spans: g.spans }],
    })),
  };
}

/** `<endpoint>/v1/traces`, unless the endpoint already names the path. */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (!url.pathname.endsWith('/v1/traces')) url.pathname = url.pathname.replace(/\/$/, '') + '/v1/traces';
  return url.toString();
}
