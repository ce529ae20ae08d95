import { call } from '../support/http';
import { startService, type RunningService } from '../support/service';

describe('operations', () => {
  let svc: RunningService;
  beforeAll(async () => (svc = await startService()));
  afterAll(() => svc.close());

  it('answers liveness and readiness with the state of PostgreSQL and Redis', async () => {
    expect((await call(svc.url, 'GET', '/health')).body).toEqual({ status: 'ok' });
    const ready = await call(svc.url, 'GET', '/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
  });

  it('says not ready, quickly, when Redis cannot be reached', async () => {
    const broken = await startService({ REDIS_URL: 'redis://127.0.0.1:1' });
    try {
      const started = Date.now();
      const ready = await call(broken.url, 'GET', '/health/ready');
      expect(ready.status).toBe(503);
      expect(ready.body.checks).toEqual({ postgres: 'ok', redis: 'down' });
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      await broken.close();
    }
  });

  it('serves an OpenAPI document generated from the validating schemas, and its UI', async () => {
    const doc = await call(svc.url, 'GET', '/docs/json');
    expect(doc.status).toBe(200);
    const ingest = doc.body.paths['/v1/events'].post;
    const eventSchema = ingest.requestBody.content['application/json'].schema.properties.events.items;
    expect(eventSchema.required).toEqual(
      expect.arrayContaining(['eventId', 'occurredAt', 'traceId', 'provider', 'model']),
    );
    // Usage in Tollgate's terms, or the provider's own with its format: one of them.
    expect(eventSchema.properties.usage.properties.inputTokens).toMatchObject({ type: 'integer', minimum: 0 });
    expect(eventSchema.properties.providerUsage.properties.format.enum).toEqual([
      'openai',
      'anthropic',
      'gemini',
      'bedrock',
      'ai-sdk',
    ]);
    expect(doc.body.paths['/v1/admin/projects/{projectId}/keys'].post).toBeDefined();
    const ui = await call(svc.url, 'GET', '/docs');
    expect(ui.headers.get('content-type')).toContain('text/html');
    expect((await fetch(`${svc.url}/docs/assets/swagger-ui-bundle.js`)).status).toBe(200);
  });

  it('answers an unknown route with a JSON 404', async () => {
    const res = await call(svc.url, 'GET', '/v1/nope');
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
  });
});
