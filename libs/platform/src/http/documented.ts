import { HTTP_CODE_METADATA, METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { RequestMethod } from '@nestjs/common';
import { z } from 'zod';
import type { KeyScope } from '../auth/api-key';
import { ERROR_STATUS, errorResponseSchema, type ErrorCode } from '../errors/app-error';

export interface RouteDoc {
  summary: string;
  tag: string;
  /**
   * Who may call the route: a project key with this scope, the operator's TOLLGATE_ADMIN_TOKEN, or
   * METRICS_TOKEN when the operator set one (`metrics-token`: open otherwise); omitted for public ones.
   */
  auth?: KeyScope | 'admin-token' | 'metrics-token';
  body?: z.ZodType;
  query?: z.ZodType;
  response?: z.ZodType;
  /** The media type of the response body when it is not JSON (e.g. Prometheus text). */
  responseMediaType?: string;
  responseDescription?: string;
  /**
   * The errors the route's own work answers (a name that is not there, a conflict, a feature the
   * operator has not configured). Those every route of its kind answers (validation, auth, rate
   * limits, body size and type, timeouts, a backing service down) are added by the generator.
   */
  errors?: ErrorCode[];
  /** Answers other than the success and the errors, by status, e.g. the readiness body with 503. */
  alsoAnswers?: Record<number, { description: string; schema: z.ZodType }>;
}

const registry: { target: object; handler: string; doc: RouteDoc }[] = [];

/** Records a route for the OpenAPI document, with the same zod schemas that validate it. */
export function Documented(doc: RouteDoc): MethodDecorator {
  return (target, key) => {
    registry.push({ target: target.constructor, handler: String(key), doc });
  };
}

const join = (...parts: string[]) =>
  '/' +
  parts
    .map((p) => p.replace(/^\/|\/$/g, ''))
    .filter(Boolean)
    .join('/');

/** Methods whose body Fastify reads (and may refuse as too large, of another type, or not JSON). */
const WITH_BODY = new Set(['post', 'put', 'patch', 'delete']);

/**
 * The errors a route answers: those of its kind, then its own. Every route may be cut off by
 * HTTP_REQUEST_TIMEOUT_MS or oversized headers, and answers 503 while the instance closes or a
 * backing service is down or busy.
 */
function errorCodesOf(method: string, doc: RouteDoc, hasParams: boolean): ErrorCode[] {
  const codes: ErrorCode[] = ['request_timeout', 'headers_too_large', 'unavailable'];
  if (doc.body || doc.query || hasParams) codes.push('validation_failed');
  if (WITH_BODY.has(method)) codes.push('invalid_json', 'payload_too_large', 'unsupported_media_type');
  if (doc.auth === 'metrics-token') codes.push('unauthorized', 'rate_limited');
  else if (doc.auth) codes.push('unauthorized', 'forbidden', 'rate_limited');
  return [...codes, ...(doc.errors ?? [])];
}

/** What each error status means, for a client deciding what to do. */
const ERROR_RESPONSES: Record<number, { name: string; description: string; retryAfter?: boolean }> = {
  400: { name: 'BadRequest', description: 'Invalid request: `field` names what to fix and `message` why' },
  401: { name: 'Unauthorized', description: 'Missing, invalid or revoked credentials' },
  403: { name: 'Forbidden', description: 'The credentials do not allow this route' },
  404: { name: 'NotFound', description: 'What the path names does not exist (in this project)' },
  408: {
    name: 'RequestTimeout',
    description:
      "The request's headers and body did not all arrive within HTTP_REQUEST_TIMEOUT_MS; the connection is closed",
  },
  409: { name: 'Conflict', description: 'The request conflicts with what exists: `message` says what' },
  413: { name: 'PayloadTooLarge', description: 'The body is larger than INGEST_MAX_BODY_BYTES' },
  415: { name: 'UnsupportedMediaType', description: 'The body is not application/json' },
  429: {
    name: 'TooManyRequests',
    description: "Past the key's rate limit, or too many failed authentications: retry after Retry-After",
    retryAfter: true,
  },
  431: { name: 'HeadersTooLarge', description: 'The request headers are too large; the connection is closed' },
  501: { name: 'NotImplemented', description: 'The operator has not configured what the request needs' },
  503: {
    name: 'ServiceUnavailable',
    description:
      'Busy, at capacity, closing, or a backing service (PostgreSQL, Redis) is unavailable: retry after Retry-After',
    retryAfter: true,
  },
};

const ERROR_SCHEMA_REF = { $ref: '#/components/schemas/Error' };
const RETRY_AFTER = {
  'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer', minimum: 0 } },
};

function errorResponseComponents(): Record<string, unknown> {
  return Object.fromEntries(
    Object.values(ERROR_RESPONSES).map(({ name, description, retryAfter }) => [
      name,
      {
        description,
        ...(retryAfter ? { headers: RETRY_AFTER } : {}),
        content: { 'application/json': { schema: ERROR_SCHEMA_REF } },
      },
    ]),
  );
}

/** `POST /v1/guard/reservations/{id}/release` → `postV1GuardReservationsByIdRelease`: unique and stable as the route. */
export function operationIdOf(method: string, path: string): string {
  const capital = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
  const words = path
    .split('/')
    .filter(Boolean)
    .map((segment) => {
      const param = /^\{(\w+)\}$/.exec(segment);
      return param
        ? `By${capital(param[1])}`
        : segment
            .split(/[^A-Za-z0-9]+/)
            .map(capital)
            .join('');
    });
  return method + words.join('');
}

const SECURITY_SCHEMES = {
  projectKey: {
    type: 'http',
    scheme: 'bearer',
    description:
      'A project key (`tg_…`), made by POST /v1/admin/projects/{projectId}/keys, with the scope the route names',
  },
  adminToken: { type: 'http', scheme: 'bearer', description: "The operator's TOLLGATE_ADMIN_TOKEN" },
  metricsToken: {
    type: 'http',
    scheme: 'bearer',
    description: 'METRICS_TOKEN, when the operator set one (the route is open otherwise)',
  },
};

function securityOf(auth: RouteDoc['auth']): { security: Record<string, string[]>[]; description?: string } {
  if (!auth) return { security: [] };
  if (auth === 'admin-token') return { security: [{ adminToken: [] }], description: 'Requires TOLLGATE_ADMIN_TOKEN.' };
  if (auth === 'metrics-token')
    return { security: [{}, { metricsToken: [] }], description: 'Requires METRICS_TOKEN when the operator set one.' };
  return { security: [{ projectKey: [] }], description: `Requires a project key with the \`${auth}\` scope.` };
}

const jsonSchema = (schema: z.ZodType, io: 'input' | 'output') => {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return rest;
};

/** An OpenAPI 3.1 document of every @Documented route. */
export function buildOpenApi(info: { title: string; version: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const operationIds = new Map<string, string>();
  for (const { target, handler, doc } of registry) {
    const fn = (target as { prototype: Record<string, unknown> }).prototype[handler] as object;
    const base = (Reflect.getMetadata(PATH_METADATA, target) as string) ?? '';
    const sub = (Reflect.getMetadata(PATH_METADATA, fn) as string) ?? '';
    const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, fn) as number].toLowerCase();
    // The status the route answers with: its @HttpCode, else Nest's default (201 for a POST).
    const status = String(
      (Reflect.getMetadata(HTTP_CODE_METADATA, fn) as number | undefined) ?? (method === 'post' ? 201 : 200),
    );
    const path = join(base, sub).replace(/:(\w+)/g, '{$1}');
    const operationId = operationIdOf(method, path);
    const taken = operationIds.get(operationId);
    if (taken) throw new Error(`operationId ${operationId} of ${method} ${path} is already ${taken}'s`);
    operationIds.set(operationId, `${method} ${path}`);
    const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    const querySchema = doc.query
      ? (jsonSchema(doc.query, 'input') as { properties?: Record<string, unknown>; required?: string[] })
      : {};
    const query = Object.entries(querySchema.properties ?? {}).map(([name, schema]) => ({
      name,
      in: 'query',
      ...(querySchema.required?.includes(name) ? { required: true } : {}),
      schema,
    }));
    const { security, description } = securityOf(doc.auth);
    const errorStatuses = [...new Set(errorCodesOf(method, doc, params.length > 0).map((c) => ERROR_STATUS[c]))];
    const responses: Record<string, unknown> = {
      [status]:
        status === '204'
          ? { description: doc.responseDescription ?? 'Done; no body' }
          : {
              description: doc.responseDescription ?? 'OK',
              ...(doc.response
                ? {
                    content: {
                      [doc.responseMediaType ?? 'application/json']: { schema: jsonSchema(doc.response, 'output') },
                    },
                  }
                : {}),
            },
    };
    for (const code of errorStatuses.sort((a, b) => a - b))
      responses[code] = { $ref: `#/components/responses/${ERROR_RESPONSES[code].name}` };
    for (const [code, also] of Object.entries(doc.alsoAnswers ?? {})) {
      const own = jsonSchema(also.schema, 'output');
      const error = ERROR_RESPONSES[Number(code)];
      // The route's own body for this status, or (as every route) the error body.
      responses[code] = {
        description: error ? `${also.description}; or: ${error.description}` : also.description,
        ...(error?.retryAfter ? { headers: RETRY_AFTER } : {}),
        content: { 'application/json': { schema: error ? { anyOf: [own, ERROR_SCHEMA_REF] } : own } },
      };
    }
    paths[path] ??= {};
    paths[path][method] = {
      operationId,
      summary: doc.summary,
      tags: [doc.tag],
      security,
      ...(description ? { description } : {}),
      ...(params.length + query.length ? { parameters: [...params, ...query] } : {}),
      ...(doc.body
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: jsonSchema(doc.body, 'input') } },
            },
          }
        : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info,
    // Relative: the service that serves this document (its own host and port, behind any proxy).
    servers: [{ url: '/', description: 'The Tollgate service serving this document' }],
    components: {
      securitySchemes: SECURITY_SCHEMES,
      schemas: { Error: jsonSchema(errorResponseSchema, 'output') },
      responses: errorResponseComponents(),
    },
    paths,
  };
}
