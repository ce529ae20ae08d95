import { call, createProject, stepEvent } from '../support/http';
import type { RunningService } from '../support/service';
import { eventually, startReceiver, startServiceWithWorker, type Receiver } from './support';

/** Checks an ExportTraceServiceRequest against the OTLP/JSON encoding rules; returns the spans. */
function parseOtlpTraces(
  json: any,
): { resource: Record<string, unknown>; span: any; attrs: Record<string, unknown> }[] {
  const valueOf = (v: any): unknown => {
    const keys = Object.keys(v);
    expect(keys).toHaveLength(1);
    if ('stringValue' in v) return v.stringValue;
    if ('intValue' in v) {
      expect(String(v.intValue)).toMatch(/^-?\d+$/);
      return Number(v.intValue);
    }
    if ('doubleValue' in v) return v.doubleValue;
    if ('boolValue' in v) return v.boolValue;
    if ('arrayValue' in v) return v.arrayValue.values.map(valueOf);
    throw new Error(`not an OTLP AnyValue: ${JSON.stringify(v)}`);
  };
  const attrsOf = (list: any[]) => Object.fromEntries(list.map((kv) => [kv.key, valueOf(kv.value)]));
  const out: ReturnType<typeof parseOtlpTraces> = [];
  expect(Array.isArray(json.resourceSpans)).toBe(true);
  for (const rs of json.resourceSpans) {
    const resource = attrsOf(rs.resource.attributes);
    for (const ss of rs.scopeSpans) {
      expect(ss.scope.name).toBe('tollgate');
      for (const span of ss.spans) {
        expect(span.traceId).toMatch(/^[0-9a-f]{32}$/);
        expect(span.spanId).toMatch(/^[0-9a-f]{16}$/);
        expect(span.startTimeUnixNano).toMatch(/^\d{19}$/);
        expect(span.endTimeUnixNano).toMatch(/^\d{19}$/);
        expect(BigInt(span.endTimeUnixNano) >= BigInt(span.startTimeUnixNano)).toBe(true);
        expect(span.kind).toBe(3);
        out.push({ resource, span, attrs: attrsOf(span.attributes) });
      }
    }
  }
  return out;
}

describe('OTLP exporter, end to end', () => {
  let svc: RunningService;
  let collector: Receiver;
  beforeAll(async () => {
    svc = await startServiceWithWorker();
    collector = await startReceiver();
  });
  afterAll(async () => {
    await svc.close();
    await collector.close();
  });

  it('sends one span per step as OTLP/HTTP JSON with the GenAI semantic-convention attributes and the cost', async () => {
    const project = await createProject(svc.url);
    const put = await call(svc.url, 'PUT', '/v1/exporters/otel', {
      token: project.key,
      body: {
        type: 'otlp',
        endpoint: collector.url,
        headers: { 'x-api-key': 'collector-key-1' },
        serviceName: 'fallback-svc',
        batch: { maxEvents: 50, maxWaitMs: 50 },
      },
    });
    expect(put.status).toBe(200);
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const agentSpan = '00f067aa0ba902b7';
    const events = [
      stepEvent({
        traceId,
        spanId: agentSpan,
        threadId: 'thread-9',
        userId: 'user-3',
        sessionId: 'sess-1',
        serviceName: 'support-bot',
        environment: 'production',
        durationMs: 1500,
        finishReason: 'stop',
        usage: {
          inputTokens: 2000,
          outputTokens: 300,
          cacheReadTokens: 1000,
          cacheWriteTokens: 100,
          reasoningTokens: 50,
        },
      }),
      stepEvent({ provider: 'anthropic', model: 'claude-sonnet-4-5', usage: { inputTokens: 10, outputTokens: 5 } }),
      stepEvent({ provider: 'acme', model: 'acme-large-9' }),
    ];
    expect((await call(svc.url, 'POST', '/v1/events', { token: project.key, body: { events } })).body.accepted).toBe(3);

    await eventually(
      () => collector.requests.length >= 1 && collector.requests.flatMap((r) => parseOtlpTraces(r.json)).length === 3,
      'three spans',
    );
    const req = collector.requests[0];
    expect(req.path).toBe('/v1/traces');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['x-api-key']).toBe('collector-key-1');

    const spans = parseOtlpTraces(req.json);
    const byEvent = new Map(spans.map((s) => [s.attrs['tollgate.event.id'], s]));
    const first = byEvent.get(events[0].eventId)!;
    expect(first.resource).toEqual({ 'service.name': 'support-bot', 'deployment.environment.name': 'production' });
    expect(first.span.traceId).toBe(traceId);
    expect(first.span.parentSpanId).toBe(agentSpan);
    expect(first.span.name).toBe('chat gpt-4o');
    expect(BigInt(first.span.endTimeUnixNano) - BigInt(first.span.startTimeUnixNano)).toBe(1_500_000_000n);
    expect(first.attrs).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.usage.input_tokens': 2000,
      'gen_ai.usage.output_tokens': 300,
      'gen_ai.usage.cache_read.input_tokens': 1000,
      'gen_ai.usage.cache_creation.input_tokens': 100,
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.conversation.id': 'thread-9',
      'user.id': 'user-3',
      'session.id': 'sess-1',
      'tollgate.project.id': project.id,
      'tollgate.cost.currency': 'USD',
      'tollgate.cost.unpriced': false,
    });
    expect(first.attrs['tollgate.cost.micros']).toBe(
      (first.attrs['tollgate.cost.input_micros'] as number) + (first.attrs['tollgate.cost.output_micros'] as number),
    );
    expect(first.attrs['tollgate.cost.amount']).toBeCloseTo((first.attrs['tollgate.cost.micros'] as number) / 1e6, 9);

    const unpriced = byEvent.get(events[2].eventId)!;
    expect(unpriced.resource['service.name']).toBe('fallback-svc');
    expect(unpriced.attrs['tollgate.cost.unpriced']).toBe(true);
    expect(unpriced.attrs['tollgate.cost.micros']).toBeUndefined();
    // A trace id that is not W3C hex is mapped to a stable one.
    expect(unpriced.span.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(unpriced.span.parentSpanId).toBeUndefined();
  });
});
