import type { LoggedEvent } from '@tollgate/database';
import { toOtlpSpan, toOtlpTraces } from './otlp';
import { toWireEvent } from './wire-event';

const stepRow = {
  trace_id: 'run-1',
  span_id: null,
  run_id: null,
  thread_id: 'th-1',
  resource_id: 'r-1',
  user_id: null,
  organization_id: null,
  session_id: null,
  entity_type: 'agent',
  entity_name: 'support',
  provider: 'acme',
  model: 'acme-large',
  environment: null,
  service_name: 'api',
  input_tokens: '1000',
  output_tokens: '200',
  cache_read_tokens: '400',
  cache_write_tokens: '0',
  reasoning_tokens: '0',
  audio_input_tokens: '0',
  image_input_tokens: '0',
  duration_ms: null,
  finish_reason: null,
  step_index: null,
  reservation_id: null,
  labels: null,
  tags: [],
};
const logged = (over: Partial<LoggedEvent>, row: Record<string, unknown>): LoggedEvent => ({
  tx: '100',
  position: 7n,
  projectId: 'p1',
  eventId: 'step-1',
  type: 'StepUsageRecorded',
  occurredAt: new Date('2026-11-20T10:00:00.000Z'),
  recordedAt: new Date('2026-11-20T10:00:01.000Z'),
  row: { ...stepRow, ...row },
  ...over,
});

const step = logged(
  {},
  {
    cost_micros: null,
    input_cost_micros: null,
    output_cost_micros: null,
    cost_unit: null,
    cost_source: null,
    price_id: null,
    unpriced: true,
    data: null,
  },
);
const correction = logged(
  {
    eventId: 'tg:reprice:step-1:1',
    position: 9n,
    type: 'StepRepriced',
    recordedAt: new Date('2026-11-21T08:00:00.000Z'),
  },
  {
    cost_micros: '3000',
    input_cost_micros: '1400',
    output_cost_micros: '1600',
    cost_unit: 'USD',
    cost_source: 'override',
    price_id: 'override:prc_1',
    unpriced: false,
    data: {
      stepEventId: 'step-1',
      stepPosition: '7',
      sequence: 1,
      old: {
        costMicros: null,
        inputCostMicros: null,
        outputCostMicros: null,
        costUnit: null,
        priceId: null,
        source: null,
      },
      new: {
        costMicros: 3000,
        inputCostMicros: 1400,
        outputCostMicros: 1600,
        costUnit: 'USD',
        priceId: 'override:prc_1',
        source: 'override',
      },
    },
  },
);

describe('StepRepriced on the wire', () => {
  it('is its own event type: the step it corrects, its cost from now on and its cost before', () => {
    const wire = toWireEvent(correction);
    expect(wire).toMatchObject({
      eventId: 'tg:reprice:step-1:1',
      type: 'StepRepriced',
      occurredAt: '2026-11-20T10:00:00.000Z',
      recordedAt: '2026-11-21T08:00:00.000Z',
      resourceId: 'r-1',
      model: 'acme-large',
      usage: { inputTokens: 1000, outputTokens: 200, cacheReadTokens: 400 },
      cost: {
        micros: 3000,
        inputMicros: 1400,
        outputMicros: 1600,
        currency: 'USD',
        source: 'override',
        priceId: 'override:prc_1',
      },
      unpriced: false,
      repriced: { stepEventId: 'step-1', sequence: 1, previousCost: null },
    });
    const twice = toWireEvent({
      ...correction,
      row: {
        ...correction.row,
        data: {
          ...(correction.row.data as object),
          sequence: 2,
          old: {
            costMicros: 3000,
            inputCostMicros: 1400,
            outputCostMicros: 1600,
            costUnit: 'USD',
            priceId: 'override:prc_1',
            source: 'override',
          },
        },
      },
    });
    expect(twice.repriced).toEqual({
      stepEventId: 'step-1',
      sequence: 2,
      previousCost: {
        micros: 3000,
        inputMicros: 1400,
        outputMicros: 1600,
        currency: 'USD',
        source: 'override',
        priceId: 'override:prc_1',
      },
    });
    expect(toWireEvent(step)).not.toHaveProperty('repriced');
  });

  it('is a child span of its step in OTLP, with its costs apart from the step costs a collector sums', () => {
    const stepSpan = toOtlpSpan(toWireEvent(step));
    const [resource] = toOtlpTraces([toWireEvent(step), toWireEvent(correction)], 'tollgate').resourceSpans;
    const [, span] = resource.scopeSpans[0].spans;
    expect(span).toMatchObject({
      traceId: stepSpan.traceId,
      parentSpanId: stepSpan.spanId,
      name: 'reprice acme-large',
      kind: 1,
      startTimeUnixNano: '1795248000000000000',
    });
    const attr = Object.fromEntries(span.attributes.map((a) => [a.key, Object.values(a.value)[0]]));
    expect(attr).toMatchObject({
      'tollgate.reprice.step_event_id': 'step-1',
      'tollgate.reprice.cost.micros': '3000',
      'tollgate.reprice.delta.micros': '3000',
      'tollgate.reprice.delta.currency': 'USD',
    });
    expect(Object.keys(attr).filter((k) => k.startsWith('tollgate.cost.') || k.startsWith('gen_ai.usage.'))).toEqual(
      [],
    );
  });
});
