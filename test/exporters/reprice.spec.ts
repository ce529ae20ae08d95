import { call, createProject, stepEvent } from '../support/http';
import type { RunningService } from '../support/service';
import { eventually, startReceiver, startServiceWithWorker, webhookExporter, type Receiver } from './support';

describe('a reprice, exported', () => {
  let svc: RunningService;
  let sink: Receiver;
  beforeAll(async () => {
    svc = await startServiceWithWorker();
    sink = await startReceiver();
  });
  afterAll(async () => {
    await svc.close();
    await sink.close();
  });

  it('sends the correction as a StepRepriced event after the step, with the cost before and after; the step is not sent again', async () => {
    const project = await createProject(svc.url);
    const api = (method: string, path: string, body?: unknown) =>
      call(svc.url, method, path, { token: project.key, body });
    expect(
      (
        await api(
          'PUT',
          '/v1/exporters/billing',
          webhookExporter(sink.url, { eventTypes: ['StepUsageRecorded', 'StepRepriced'] }),
        )
      ).status,
    ).toBe(200);
    const at = Date.now() - 60_000;
    const step = stepEvent({
      provider: 'acme',
      model: 'acme-large',
      occurredAt: new Date(at).toISOString(),
      usage: { inputTokens: 1000, outputTokens: 200 },
    });
    expect((await api('POST', '/v1/events', { events: [step] })).body.accepted).toBe(1);
    await api('PUT', '/v1/prices/acme/acme-large', {
      effectiveFrom: new Date(at - 1000).toISOString(),
      inputPerMillion: 2,
      outputPerMillion: 8,
    });
    const res = await api('POST', '/v1/prices/reprice', {
      from: new Date(at - 1000).toISOString(),
      to: new Date(at + 1).toISOString(),
    });
    expect(res.body.repriced).toBe(1);

    const events = await eventually(() => {
      const got = sink.requests.flatMap((r) => r.json?.events ?? []).filter((e: any) => e.projectId === project.id);
      return got.length >= 2 ? got : null;
    }, 'the step and its correction at the receiver');
    expect(events.map((e: any) => [e.type, e.eventId])).toEqual([
      ['StepUsageRecorded', step.eventId],
      ['StepRepriced', `tg:reprice:${step.eventId}:1`],
    ]);
    expect(events[0]).toMatchObject({ cost: null, unpriced: true });
    expect(events[1]).toMatchObject({
      occurredAt: step.occurredAt,
      traceId: step.traceId,
      resourceId: step.resourceId,
      cost: { micros: 3600, inputMicros: 2000, outputMicros: 1600, currency: 'USD', source: 'override' },
      repriced: { stepEventId: step.eventId, sequence: 1, previousCost: null },
    });
  });
});
