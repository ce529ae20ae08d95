import { verifyWebhook } from '@tollgate/exporters';
import { randomUUID } from 'node:crypto';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import type { RunningService } from '../support/service';
import {
  acceptedEventIds,
  eventually,
  startReceiver,
  startServiceWithWorker,
  webhookExporter,
  type Receiver,
} from './support';

/** Budget alerts reach receivers like any event: a signed webhook, and a Slack incoming webhook. */
describe('budget alerts through exporters', () => {
  let svc: RunningService;
  const receivers: Receiver[] = [];
  beforeAll(async () => (svc = await startServiceWithWorker()));
  afterAll(async () => {
    await svc.close();
    await Promise.all(receivers.map((r) => r.close()));
  });
  const receiver = async (answer?: Parameters<typeof startReceiver>[0]) => {
    const r = await startReceiver(answer);
    receivers.push(r);
    return r;
  };
  const api = (p: TestProject, method: string, path: string, body?: unknown) =>
    call(svc.url, method, path, { token: p.key, body });

  /** A policy with a threshold at 50%, a step that crosses it, and a check its hard limit denies. */
  const alertTwice = async (p: TestProject) => {
    const resourceId = `r-${randomUUID()}`;
    expect(
      (
        await api(p, 'PUT', '/v1/policies/team', {
          scope: 'resource',
          window: '24h',
          maxTotalTokens: 1000,
          alerts: [50],
        })
      ).status,
    ).toBe(200);
    const step = stepEvent({ resourceId, usage: { inputTokens: 1000, outputTokens: 0 } });
    expect((await api(p, 'POST', '/v1/events', { events: [step] })).body.accepted).toBe(1);
    expect((await api(p, 'POST', '/v1/guard/check', { context: { resourceId } })).body.decision).toBe('deny');
    return { resourceId, step };
  };

  it('a webhook that asks for the alert types gets them signed, after a failed attempt retried', async () => {
    const sink = await receiver((n) => (n === 0 ? 503 : 200));
    const p = await createProject(svc.url);
    expect(
      (
        await api(
          p,
          'PUT',
          '/v1/exporters/alerts',
          webhookExporter(sink.url, { eventTypes: ['BudgetThresholdCrossed', 'BudgetExhausted'] }),
        )
      ).status,
    ).toBe(200);
    const { resourceId, step } = await alertTwice(p);
    await eventually(() => acceptedEventIds(sink).length === 2, 'both alerts delivered');
    const events = sink.requests.filter((r) => r.status === 200).flatMap((r) => r.json.events);
    expect(events.map((e: any) => e.type).sort()).toEqual(['BudgetExhausted', 'BudgetThresholdCrossed']);
    const crossed = events.find((e: any) => e.type === 'BudgetThresholdCrossed');
    expect(crossed).toMatchObject({
      resourceId,
      data: {
        scopeKey: `resource:${resourceId}`,
        window: '24h',
        source: 'policy:team',
        threshold: 50,
        usage: 1000,
        limit: 1000,
        unit: 'tokens',
        stepEventId: step.eventId,
      },
    });
    expect(sink.requests[0].status).toBe(503);
    for (const req of sink.requests) {
      expect(
        verifyWebhook(
          'whsec-test-0123456789',
          req.body,
          String(req.headers['x-tollgate-timestamp']),
          String(req.headers['x-tollgate-signature']),
        ),
      ).toBe(true);
    }
  });

  it('a slack exporter posts text and blocks naming the scope, the policy, usage against limit and a dashboard link', async () => {
    const sink = await receiver();
    const p = await createProject(svc.url);
    const put = await api(p, 'PUT', '/v1/exporters/slack', {
      type: 'slack',
      url: `${sink.url}/services/T000/B000/XXXX`,
      dashboardUrl: 'https://tollgate.example.com/dashboard',
      batch: { maxEvents: 10, maxWaitMs: 50 },
      retry: { maxAttempts: 3, initialBackoffMs: 50, maxBackoffMs: 100 },
    });
    expect(put.status).toBe(200);
    expect(JSON.stringify(put.body)).not.toContain('XXXX');
    const { resourceId } = await alertTwice(p);
    await eventually(() => sink.requests.flatMap((r) => r.json.blocks.slice(1)).length === 2, 'both alerts posted');
    expect(sink.requests[0].path).toBe('/services/T000/B000/XXXX');
    expect(sink.requests[0].headers['content-type']).toBe('application/json');
    const sections = sink.requests.flatMap((r) =>
      r.json.blocks.filter((b: any) => b.type === 'section').map((b: any) => b.text.text),
    );
    const link = `<https://tollgate.example.com/dashboard/#/scope/resource/${encodeURIComponent(resourceId)}|Open in the dashboard>`;
    expect(sections).toEqual([
      `Budget at 50%: resource:${resourceId} (24h), policy:team, 1,000 tokens of 1,000 tokens (totalTokens) ${link}`,
      `Budget exhausted: resource:${resourceId} (24h), policy:team denied a step at 1,000 tokens of 1,000 tokens (totalTokens) ${link}`,
    ]);
    for (const r of sink.requests) {
      expect(typeof r.json.text).toBe('string');
      expect(r.json.blocks[0]).toMatchObject({ type: 'header' });
    }
  });

  it('refuses a slack batch larger than a message holds, with the field', async () => {
    const p = await createProject(svc.url);
    const res = await api(p, 'PUT', '/v1/exporters/big', {
      type: 'slack',
      url: 'http://127.0.0.1:1/x',
      batch: { maxEvents: 100 },
    });
    expect({ status: res.status, field: res.body.field }).toEqual({ status: 400, field: 'batch.maxEvents' });
  });
});
