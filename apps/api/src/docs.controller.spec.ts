import 'reflect-metadata';
import './api.module';
import { DocsController } from './docs.controller';

/**
 * Routes whose answer the OpenAPI document does not describe yet (no `response` zod schema in
 * their @Documented). This list only shrinks: a new route must come with its response schema,
 * and a route given one must leave the list.
 */
const WITHOUT_RESPONSE_SCHEMA: string[] = [];

describe('the OpenAPI document (/docs/json)', () => {
  const doc = new DocsController().json() as {
    paths: Record<string, Record<string, { responses: Record<string, { content?: unknown }> }>>;
  };
  const routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ route: `${method.toUpperCase()} ${path}`, op })),
  );

  it('describes every route', () => {
    expect(routes.length).toBeGreaterThanOrEqual(45);
  });

  it('says the status each route answers with', () => {
    expect(Object.keys(doc.paths['/v1/admin/projects'].post.responses)[0]).toBe('201');
    expect(Object.keys(doc.paths['/v1/guard/check'].post.responses)[0]).toBe('200');
    expect(Object.keys(doc.paths['/v1/policies/{name}'].delete.responses)[0]).toBe('204');
  });

  it('describes the answers of documented routes with the fields of their zod schemas', () => {
    const list = doc.paths['/v1/policies'].get.responses['200'].content as {
      'application/json': {
        schema: { properties: { policies: { items: { properties: Record<string, { description?: string }> } } } };
      };
    };
    const fields = list['application/json'].schema.properties.policies.items.properties;
    expect(fields.window.description).toMatch(/a run budget has none/);
    expect(Object.keys(fields)).toEqual(
      expect.arrayContaining(['name', 'scope', 'window', 'maxCost', 'strategy', 'updatedAt']),
    );
  });

  it('has a response schema for every route but the known ones, and the known list only shrinks', () => {
    // A 204 has no body to describe.
    const without = routes
      .filter(({ op }) => !op.responses['204'] && !Object.values(op.responses).some((r) => r.content))
      .map((r) => r.route);
    expect({
      newWithout: without.filter((r) => !WITHOUT_RESPONSE_SCHEMA.includes(r)),
      nowDescribed: WITHOUT_RESPONSE_SCHEMA.filter((r) => !without.includes(r)),
    }).toEqual({ newWithout: [], nowDescribed: [] });
  });
});
