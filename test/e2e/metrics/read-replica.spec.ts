import { MetricsReadDb } from '@tollgate/usage-metrics';
import { TEST_DATABASE_URL } from '../../support/env';
import { call, createProject, stepEvent } from '../../support/http';
import { startService, type RunningService } from '../../support/service';

/**
 * DATABASE_READ_URL: metric queries on their own pool. Here the "replica" is the same database
 * through a second URL: this proves the wiring (queries go through the read pool, answers stay
 * exact); replication lag and a replica going away are `npm run test:replica`'s (test/replica).
 */
describe('metric queries on DATABASE_READ_URL', () => {
  const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];

  async function sumAfterIngest(svc: RunningService): Promise<unknown> {
    const p = await createProject(svc.url);
    const events = [
      stepEvent({ usage: { inputTokens: 1234, outputTokens: 56 } }),
      stepEvent({ usage: { inputTokens: 10, outputTokens: 1 } }),
    ];
    expect((await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events } })).body.accepted).toBe(2);
    const agg = await call(svc.url, 'POST', '/api/observability/metrics/aggregate', {
      token: p.key,
      body: { name: TOTALS, aggregation: 'sum' },
    });
    const names = await call(svc.url, 'GET', '/api/observability/discovery/entity-names', { token: p.key });
    return [agg.status, agg.body.value, names.body.names];
  }

  it('uses a pool on the read URL when it is set, and answers exactly', async () => {
    const url = new URL(TEST_DATABASE_URL);
    url.searchParams.set('application_name', 'tollgate-replica-spec');
    const svc = await startService({ DATABASE_READ_URL: url.toString() });
    try {
      const read = svc.app.get(MetricsReadDb);
      expect(read.replica).not.toBeNull();
      expect(await sumAfterIngest(svc)).toEqual([200, 1301, ['support-agent']]);
      expect(read.replica!.totalCount).toBeGreaterThan(0);
    } finally {
      await svc.close();
    }
  });

  it('uses the main pool when it is unset', async () => {
    const svc = await startService();
    try {
      expect(svc.app.get(MetricsReadDb).replica).toBeNull();
      expect(await sumAfterIngest(svc)).toEqual([200, 1301, ['support-agent']]);
    } finally {
      await svc.close();
    }
  });
});
