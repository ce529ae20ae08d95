import { HTTP_CODE_METADATA, METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { RequestMethod } from '@nestjs/common';
import { z } from 'zod';
import type { KeyScope } from '../auth/api-key';

export interface RouteDoc {
  summary: string;
  tag: string;
  /** Key scope the route requires, or 'admin-token' for operator routes; omitted for public ones. */
  auth?: KeyScope | 'admin-token';
  body?: z.ZodType;
  query?: z.ZodType;
  response?: z.ZodType;
  /** The media type of the response body when it is not JSON (e.g. Prometheus text). */
  responseMediaType?: string;
  responseDescription?: string;
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

/** An OpenAPI 3.1 document of every @Documented route. */
export function buildOpenApi(info: { title: string; version: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
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
    const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    const query = doc.query
      ? Object.entries(
          (
            z.toJSONSchema(doc.query, { io: 'input', unrepresentable: 'any' }) as {
              properties?: Record<string, unknown>;
            }
          ).properties ?? {},
        ).map(([name, schema]) => ({ name, in: 'query', schema }))
      : [];
    paths[path] ??= {};
    paths[path][method] = {
      summary: doc.summary,
      tags: [doc.tag],
      ...(doc.auth
        ? {
            security: [{ bearer: [] }],
            description:
              doc.auth === 'admin-token'
                ? 'Requires TOLLGATE_ADMIN_TOKEN.'
                : `Requires a project key with the \`${doc.auth}\` scope.`,
          }
        : {}),
      parameters: [...params, ...query],
      ...(doc.body
        ? {
            requestBody: {
              required: true,
              content: {
                'application/json': { schema: z.toJSONSchema(doc.body, { io: 'input', unrepresentable: 'any' }) },
              },
            },
          }
        : {}),
      responses: {
        [status]:
          status === '204'
            ? { description: doc.responseDescription ?? 'Done; no body' }
            : {
                description: doc.responseDescription ?? 'OK',
                ...(doc.response
                  ? {
                      content: {
                        [doc.responseMediaType ?? 'application/json']: {
                          schema: z.toJSONSchema(doc.response, { io: 'output', unrepresentable: 'any' }),
                        },
                      },
                    }
                  : {}),
              },
        '400': { description: 'Invalid request: the body names the field and the reason' },
        ...(doc.auth
          ? {
              '401': { description: 'Missing, invalid or revoked key' },
              '403': { description: 'The key lacks the scope' },
            }
          : {}),
      },
    };
  }
  return {
    openapi: '3.1.0',
    info,
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    paths,
  };
}
