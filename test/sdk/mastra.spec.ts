import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { ROOT, eventRows, requireRoute } from './support';

describe('Mastra agents reporting through @tollgate/sdk/mastra', () => {
  let svc: RunningService;
  let dist: string;

  beforeAll(async () => {
    svc = await startService();
    // Inside the repository (test/artifacts is ignored by git) so the build finds zod and @mastra/core.
    mkdirSync(join(ROOT, 'test/artifacts'), { recursive: true });
    dist = mkdtempSync(join(ROOT, 'test/artifacts/sdk-dist-'));
    execFileSync(process.execPath, [join(ROOT, 'libs/sdk/scripts/build.mjs'), '--out', dist], { stdio: 'pipe' });
  }, 120_000);
  afterAll(async () => {
    await svc.close();
    rmSync(dist, { recursive: true, force: true });
  });

  /** Runs one scenario of scenarios.mjs in plain Node against the service, as a fresh project. */
  async function scenario(name: string, scopes = ['ingest', 'guard', 'read']) {
    const project = await createProject(svc.url, scopes);
    const resourceId = `res-${randomUUID()}`;
    const { stdout } = await promisify(execFile)(process.execPath, [join(__dirname, 'mastra/scenarios.mjs'), name], {
      cwd: ROOT,
      env: {
        ...process.env,
        TOLLGATE_URL: svc.url,
        TOLLGATE_KEY: project.key,
        TOLLGATE_SDK_DIST: dist,
        RESOURCE_ID: resourceId,
      },
      encoding: 'utf8',
    });
    const lines = stdout.trim().split('\n');
    return { project, resourceId, out: JSON.parse(lines[lines.length - 1]) };
  }

  it('records every LLM step of a multi-step agent run with a tool, with its scope ids and tokens', async () => {
    const { project, resourceId, out } = await scenario('steps');
    expect(out.text).toBe('It is sunny in Paris.');
    expect(out.usage).toEqual({ inputTokens: 2700, outputTokens: 72 });
    const rows = await eventRows(project.id);
    expect(
      rows.map((r) => [
        r.step_index,
        r.input_tokens,
        r.output_tokens,
        r.cache_read_tokens,
        r.reasoning_tokens,
        r.finish_reason,
      ]),
    ).toEqual([
      [0, 1200, 60, 400, 20, 'tool-calls'],
      [1, 1500, 12, 0, 0, 'stop'],
    ]);
    for (const r of rows) {
      expect(r).toMatchObject({
        resource_id: resourceId,
        thread_id: 'thread-1',
        entity_type: 'agent',
        entity_name: 'weather-agent',
        provider: 'openai',
        model: 'gpt-4o',
        reservation_id: null,
      });
    }
    // Both steps belong to one run; without Mastra tracing, the run stands for the trace.
    expect(rows[0].run_id).toEqual(expect.any(String));
    expect(rows[1].run_id).toBe(rows[0].run_id);
    expect(rows[0].trace_id).toBe(rows[0].run_id);
  }, 60_000);

  it("turns the metrics Mastra's exporters write through TollgateObservabilityStore into step events, one per model span", async () => {
    const { project, resourceId, out } = await scenario('store-writes', ['ingest']);
    expect(out.configured).toBe(true);
    expect(out.stats).toMatchObject({ accepted: 2, duplicates: 1, rejected: 0, dropped: 0 });
    const rows = await eventRows(project.id);
    expect(
      rows.map((r) => [
        r.event_id,
        r.input_tokens,
        r.output_tokens,
        r.cache_read_tokens,
        r.resource_id,
        r.run_id,
        r.trace_id,
      ]),
    ).toEqual([
      ['mastra:trace-x/span-1', 900, 90, 300, resourceId, 'run-x', 'trace-x'],
      ['mastra:trace-x/span-2', 50, 5, 0, resourceId, 'run-x', 'trace-x'],
    ]);
  }, 60_000);

  it('applies the caller’s fail mode when the guard cannot be reached: fail-closed is a TripWire before any model call', async () => {
    const { out } = await scenario('fail-closed');
    expect(out.modelCalls).toBe(0);
    expect(out.tripwire).toMatchObject({
      processorId: 'tollgate-step',
      retry: false,
      metadata: { decision: { decision: 'deny' } },
    });
    expect(out.tripwire.metadata.decision.reason).toMatch(
      /^guard unavailable \(network_error\): fail-closed applied by the SDK/,
    );
  }, 60_000);

  // Waits for the metrics merge: fails with a clear message until POST /api/observability/metrics/aggregate exists.
  describe('[waits for the metrics merge] Mastra’s TokenCostControl enforcing budgets from Tollgate', () => {
    it('blocks the run with the documented TripWire once the resource has spent its budget, and lets another resource run', async () => {
      const probe = await createProject(svc.url, ['read']);
      await requireRoute(svc.url, 'POST', '/api/observability/metrics/aggregate', probe.key, 'metrics');
      const { resourceId, out } = await scenario('cost-control');
      expect(out.blocked).toMatchObject({
        processorId: 'token-cost-control',
        retry: false,
        metadata: {
          processorId: 'token-cost-control',
          scope: 'resource',
          scopeKey: `resource:${resourceId}`,
          maxCost: 0.01,
          threshold: 'hard',
        },
      });
      expect(out.blocked.reason).toMatch(/^Cost control: estimated cost limit exceeded \(0\.025\d*\/0\.01\)$/);
      expect(out.fresh).toBeNull();
    }, 60_000);
  });

  // Waits for the guard merge: fails with a clear message until POST /v1/guard/check exists.
  describe('[waits for the guard merge] TollgateStepProcessor checking the guard before each step', () => {
    it('reserves before each step and names the reservation in the step event that settles it', async () => {
      const probe = await createProject(svc.url, ['guard']);
      await requireRoute(svc.url, 'POST', '/v1/guard/check', probe.key, 'guard');
      const { project, out } = await scenario('guard-reserve');
      expect(out.tripwire).toBeNull();
      const rows = await eventRows(project.id);
      expect(rows).toHaveLength(2);
      expect(rows.every((r) => typeof r.reservation_id === 'string' && r.reservation_id.length > 0)).toBe(true);
      expect(new Set(rows.map((r) => r.reservation_id)).size).toBe(2);
    }, 60_000);

    it('denies a step with a TripWire when the resource is over its budget', async () => {
      const probe = await createProject(svc.url, ['guard']);
      await requireRoute(svc.url, 'POST', '/v1/guard/check', probe.key, 'guard');
      const { resourceId, out } = await scenario('guard-deny');
      expect(out.tripwire).toMatchObject({
        processorId: 'tollgate-step',
        retry: false,
        metadata: {
          decision: {
            decision: 'deny',
            violations: [
              expect.objectContaining({ scope: 'resource', scopeKey: `resource:${resourceId}`, limitType: 'cost' }),
            ],
          },
        },
      });
    }, 60_000);
  });
});
