import { call, createProject, stepEvent } from '../../support/http';
import { startService, type RunningService } from '../../support/service';

/**
 * Discovery must list every value of a project even when the projector is far behind on other
 * projects' events (or never ran): its unprojected tail is the project's own, with no cap.
 */
describe('discovery while the projection is far behind', () => {
  let svc: RunningService;
  beforeAll(async () => (svc = await startService()));
  afterAll(() => svc.close());

  it("lists a new project's entity names behind more than 10,000 unprojected events of another project", async () => {
    const noisy = await createProject(svc.url);
    await svc.prisma.sql.query('SELECT ensure_event_partition(now())');
    await svc.prisma.sql.query(
      `INSERT INTO events (project_id, event_id, type, occurred_at, trace_id, entity_type, entity_name, provider, model, input_tokens, output_tokens)
       SELECT $1, 'bulk-' || i, 'StepUsageRecorded', now(), 't', 'agent', 'noisy-agent', 'openai', 'gpt-4o', 1, 1 FROM generate_series(1, 12000) AS i`,
      noisy.id,
    );
    const p = await createProject(svc.url);
    await call(svc.url, 'POST', '/v1/events', {
      token: p.key,
      body: { events: [stepEvent({ entityName: 'late-agent', serviceName: 'billing' })] },
    });
    const names = await call(svc.url, 'GET', '/api/observability/discovery/entity-names', { token: p.key });
    expect(names.body.names).toEqual(['late-agent']);
    expect(
      (await call(svc.url, 'GET', '/api/observability/discovery/service-names', { token: p.key })).body.serviceNames,
    ).toEqual(['billing']);
  });
});
