import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

/**
 * The contract between the service and its OpenAPI document, checked on what the end-to-end specs
 * really see: `call()` records every answer of a service started by `startService`, and after each
 * spec file (test/support/jest-setup.ts) every recorded answer must be one the document describes —
 * its status documented for the route, its body valid against that status's schema (the error
 * schema for every error). An undocumented status or a body that drifted from its schema fails the
 * spec file that saw it.
 */
export interface Seen {
  method: string;
  /** The URL path, without the query. */
  path: string;
  status: number;
  contentType: string | null;
  body: unknown;
}

const services = new Set<string>();
const seen: Seen[] = [];

/** Answers from this base URL are checked against the document. */
export function checkAnswersOf(baseUrl: string): void {
  services.add(baseUrl);
}

export function recordAnswer(baseUrl: string, answer: Seen): void {
  // A copy: a spec may change the body it was given (drop a field before comparing) once answered.
  if (services.has(baseUrl)) seen.push({ ...answer, body: structuredClone(answer.body) });
}

/** Routes that are pages, not API: not in the document, so not checked. */
const PAGES = /^\/(docs|dashboard)(\/|$)|^\/$/;

type Schema = Record<string, unknown>;
interface Response {
  $ref?: string;
  content?: Record<string, { schema: Schema }>;
}
interface Document {
  paths: Record<string, Record<string, { responses: Record<string, Response> }>>;
  components: { responses: Record<string, Response>; schemas: Record<string, Schema> };
}

/** The document's path templates, the most literal first (so /v1/steps/latency is not /v1/runs/{traceId}'s). */
function routesOf(doc: Document): { template: string; pattern: RegExp }[] {
  return Object.keys(doc.paths)
    .map((template) => ({
      template,
      pattern: new RegExp(`^${template.replace(/\{\w+\}/g, '[^/]+')}/?$`),
      literal: template.split('/').filter((s) => !s.startsWith('{')).length,
    }))
    .sort((a, b) => b.literal - a.literal);
}

/** Every problem with the answers `answers` against `doc`: one line each. */
export function contractProblems(doc: Document, answers: readonly Seen[]): string[] {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  ajv.addSchema(doc as object, 'openapi.json');
  const pointer = (...parts: string[]) =>
    'openapi.json#/' + parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
  const validate = (ref: string, body: unknown) => {
    const fn = ajv.getSchema(ref);
    if (!fn) return `the document has no schema at ${ref}`;
    return fn(body) ? null : ajv.errorsText(fn.errors, { dataVar: 'body' });
  };
  const routes = routesOf(doc);
  const problems = new Set<string>();
  for (const a of answers) {
    const method = a.method.toLowerCase();
    const where = `${a.method} ${a.path} → ${a.status}`;
    if (PAGES.test(a.path)) continue;
    const route = routes.find((r) => r.pattern.test(a.path) && doc.paths[r.template][method]);
    if (!route) {
      // No such route: a 404 in the error body every route answers.
      if (a.status !== 404) problems.add(`${where}: no documented route answers this`);
      const error = validate(pointer('components', 'schemas', 'Error'), a.body);
      if (error) problems.add(`${where}: not the error schema: ${error}`);
      continue;
    }
    const op = `${a.method} ${route.template}`;
    const responses = doc.paths[route.template][method].responses;
    let response = responses[String(a.status)];
    if (!response) {
      problems.add(`${op} answered ${a.status}, which the document does not list (${Object.keys(responses)})`);
      continue;
    }
    let base = ['paths', route.template, method, 'responses', String(a.status)];
    if (response.$ref) {
      const name = response.$ref.replace('#/components/responses/', '');
      response = doc.components.responses[name];
      base = ['components', 'responses', name];
    }
    if (!response.content) {
      if (a.body !== undefined && a.body !== '')
        problems.add(`${op} → ${a.status}: a body where the document has none`);
      continue;
    }
    const mediaType = (a.contentType ?? '').split(';')[0].trim();
    const documented = Object.keys(response.content).find((t) => t.split(';')[0].trim() === mediaType);
    if (!documented) {
      problems.add(`${op} → ${a.status}: content-type ${a.contentType}, documented ${Object.keys(response.content)}`);
      continue;
    }
    const error = validate(pointer(...base, 'content', documented, 'schema'), a.body);
    if (error) problems.add(`${op} → ${a.status}: the body does not match the document: ${error}`);
  }
  return [...problems];
}

/** The recorded answers of this spec file against the service's document; throws with every problem. */
export async function checkRecordedAnswers(): Promise<void> {
  if (!seen.length) return;
  // The document as GET /docs/json serves it, built from the same registrations.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  require('../../apps/api/src/api.module');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { DocsController } =
    require('../../apps/api/src/docs.controller') as typeof import('../../apps/api/src/docs.controller');
  const problems = contractProblems(new DocsController().json() as unknown as Document, seen.splice(0));
  if (problems.length) throw new Error(`Answers the OpenAPI document does not describe:\n  ${problems.join('\n  ')}`);
}
