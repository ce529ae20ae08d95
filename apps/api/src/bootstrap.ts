import { DynamicModule, Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { PrismaService } from '@tollgate/database';
import { ingestShed } from '@tollgate/telemetry';
import {
  ApiKeyAuth,
  createLogger,
  HttpExceptionFilter,
  IngestAdmission,
  PlatformModule,
  redactUrl,
  refuseWhileClosing,
  strictJsonParser,
  useLeanAsyncResourceBind,
  type AppConfig,
} from '@tollgate/platform';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiFeaturesModule } from './api.module';

@Module({})
class RootModule {
  static with(config: AppConfig, features: Type[]): DynamicModule {
    return { module: RootModule, imports: [PlatformModule.forRoot(config), ...features] };
  }
}

/**
 * Builds the HTTP application on Fastify (measured faster than Express for our small JSON
 * requests; see the foundation issue's note) with `extraFeatures` mounted beside the API — the
 * single-process entrypoint adds the worker's modules there.
 */
export async function createApiApp(config: AppConfig, extraFeatures: Type[] = []): Promise<NestFastifyApplication> {
  useLeanAsyncResourceBind();
  const adapter = new FastifyAdapter({
    bodyLimit: config.INGEST_MAX_BODY_BYTES,
    // Past Fastify's default of 100 a long id got the router's own 414; ids are checked (≤ 256) by the route.
    // `/dashboard/` and `/docs/` are the pages too (their assets are linked by absolute paths).
    routerOptions: { maxParamLength: 1024, ignoreTrailingSlash: true },
    // Reject a JSON body with __proto__ or constructor.prototype instead of silently keeping it.
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // A request that arrives while the instance closes is refused by refuseWhileClosing, in the documented error body.
    return503OnClosing: false,
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    http: {
      headersTimeout: Math.min(60_000, config.HTTP_REQUEST_TIMEOUT_MS),
      // Node looks for requests past their timeout only this often (30 s by default, so a slow body
      // was closed anywhere between 30 and 60 s after it began, later under load).
      connectionsCheckingInterval: 500,
    },
    trustProxy: trustedProxies(config.TRUST_PROXY),
    logger: false,
    clientErrorHandler: answerClientError,
  });
  const logger = createLogger(config.LOG_LEVEL);
  const app = await NestFactory.create<NestFastifyApplication>(
    RootModule.with(config, [ApiFeaturesModule, ...extraFeatures]),
    adapter,
    { logger, bodyParser: false },
  );
  app.useGlobalFilters(new HttpExceptionFilter());
  app.enableShutdownHooks();

  const fastify = app.getHttpAdapter().getInstance();
  // A browser pointed at the service lands on the dashboard.
  fastify.get('/', (_req, reply) => void reply.redirect('/dashboard', 302));
  // JSON only: a text/plain or form body is a client mistake (415), not a string to validate
  // (Nest's own body parsers are off, so no urlencoded parser is registered).
  fastify.removeContentTypeParser('text/plain');
  fastify.removeContentTypeParser('application/json');
  refuseWhileClosing(fastify);
  securityHeaders(fastify);
  fastify.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: config.INGEST_MAX_BODY_BYTES },
    strictJsonParser(fastify.getDefaultJsonParser('error', 'error') as never),
  );
  shedIngest(
    fastify,
    config,
    new IngestAdmission(config.INGEST_MAX_IN_FLIGHT_BYTES, config.INGEST_MAX_POOL_WAITING, app.get(PrismaService).pool),
    app.get(ApiKeyAuth),
  );
  // One line per request: method, route, status, time — at debug level for successes, since
  // guard checks come by the thousand per second; a client's mistake (4xx) at info, a failure
  // of ours (5xx) at warn — the filter logs an unexpected one's stack at error. Never headers:
  // they carry keys.
  fastify.addHook('onResponse', (req, reply, done) => {
    const line = {
      msg: 'request',
      method: req.method,
      route: req.routeOptions.url ?? req.url.split('?')[0],
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
    };
    if (reply.statusCode >= 500) logger.warn(line, 'http');
    else if (reply.statusCode >= 400) logger.log(line, 'http');
    else logger.debug(line, 'http');
    done();
  });
  return app;
}

/**
 * What the HTTP server answers itself, before any route, when a request cannot be read: in the error
 * body every route answers (`{ statusCode, code, message }`, as documented), not Fastify's own.
 */
function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  // A reset connection has no one to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request_timeout', "The request's headers and body did not all arrive in time (HTTP_REQUEST_TIMEOUT_MS)"]
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'headers_too_large', 'The request headers are too large']
        : [400, 'validation_failed', 'The request is not valid HTTP'];
  const body = JSON.stringify({ statusCode: status, code, message });
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  socket.destroy(err);
}

/** TRUST_PROXY as Fastify takes it: a hop count, or the addresses and CIDRs of the proxies. */
function trustedProxies(value: string | undefined): number | string[] | undefined {
  if (value === undefined) return undefined;
  return /^\d+$/.test(value) ? Number(value) : value.split(',').map((p) => p.trim());
}

/**
 * The dashboard and the API reference load only their own files: no inline script, no other
 * origin, no framing. The dashboard sizes its meters and bars with style attributes, so those
 * (`style-src-attr`, not <style> elements or other origins' stylesheets) are allowed on it alone.
 * /docs has one inline script (SwaggerUIBundle's start, in docs.controller.ts), allowed by its hash;
 * if that script changes, so must the hash (test/e2e/exposure.spec.ts loads both pages in Chromium).
 */
const pagePolicy = (script: string, styleAttributes: boolean) =>
  [
    "default-src 'self'",
    `script-src ${script}`,
    "style-src 'self'",
    ...(styleAttributes ? ["style-src-attr 'unsafe-inline'"] : []),
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
const DASHBOARD_POLICY = pagePolicy("'self'", true);
const DOCS_PAGE_POLICY = pagePolicy("'self' 'sha256-tgjt5auCSQfoEerCHYvvexPI5QyAmrlx1ROH7n5sKUQ='", false);
const DOCS_POLICY = pagePolicy("'self'", false);
const PAGES = /^\/(dashboard|docs)(\/|\?|$)/;
const DOCS_PAGE = /^\/docs\/?(\?|$)/;

function securityHeaders(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (req, reply, done) => {
    // Every answer has the type it says it has: nothing is to be sniffed as HTML or script.
    void reply.header('x-content-type-options', 'nosniff');
    if (PAGES.test(req.url)) {
      const policy = DOCS_PAGE.test(req.url)
        ? DOCS_PAGE_POLICY
        : req.url.startsWith('/docs')
          ? DOCS_POLICY
          : DASHBOARD_POLICY;
      void reply
        .header('content-security-policy', policy)
        .header('x-frame-options', 'DENY')
        .header('referrer-policy', 'no-referrer');
    }
    done();
  });
}

const isIngest = (req: { method: string; routeOptions: { url?: string } }) =>
  req.method === 'POST' && req.routeOptions.url === '/v1/events';

/**
 * POST /v1/events is refused with 503 + Retry-After as it arrives, before its body is read (nothing
 * of it stored), while the database pool has a queue past INGEST_MAX_POOL_WAITING or the ingest
 * bodies in flight would pass INGEST_MAX_IN_FLIGHT_BYTES; the pool is asked again just before the
 * handler. Its key is checked first (and the body of a request with a bad one is never read): a
 * client without a valid key cannot take capacity by trickling bodies in. The guard answers its own
 * busy and is not shed here.
 */
function shedIngest(fastify: FastifyInstance, config: AppConfig, admission: IngestAdmission, keys: ApiKeyAuth): void {
  const refuse = (reply: FastifyReply, reason: 'pool' | 'bytes') => {
    ingestShed.inc({ reason });
    return reply.status(503).header('retry-after', '1').send({
      statusCode: 503,
      code: 'unavailable',
      message: 'This instance is at capacity; retry after the Retry-After header',
    });
  };
  // Callbacks, not async hooks: every other request passes these without a promise.
  fastify.addHook('onRequest', (req, reply, done) => {
    if (!isIngest(req)) return done();
    if (admission.poolBacklogged()) return void refuse(reply, 'pool');
    keys.authenticate(req).then(() => {
      const declared = Number(req.headers['content-length']);
      const bytes =
        Number.isFinite(declared) && declared >= 0
          ? Math.min(declared, config.INGEST_MAX_BODY_BYTES)
          : config.INGEST_MAX_BODY_BYTES;
      const refused = admission.admit(bytes);
      if (refused !== null) return void refuse(reply, refused);
      // Answered, failed or cut off: the bytes are given back.
      reply.raw.once('close', () => admission.release(bytes));
      done();
    }, done);
  });
  fastify.addHook('preHandler', (req, reply, done) =>
    isIngest(req) && admission.poolBacklogged() ? void refuse(reply, 'pool') : done(),
  );
}

/** Where a started service's things are: the line `npm start` ends with. */
export function whereThingsAre(config: AppConfig, address: { port: number }): Record<string, string> {
  const host =
    config.HOST === '0.0.0.0' || config.HOST === '::'
      ? 'localhost'
      : config.HOST.includes(':')
        ? `[${config.HOST}]`
        : config.HOST;
  const base = `http://${host}:${address.port}`;
  return {
    api: base,
    dashboard: `${base}/dashboard`,
    docs: `${base}/docs`,
    health: `${base}/health`,
    ready: `${base}/health/ready`,
    metrics: `${base}/metrics`,
    database: redactUrl(config.DATABASE_URL),
    redis: redactUrl(config.REDIS_URL),
    queuePrefix: config.QUEUE_PREFIX,
  };
}

/** Boot failed (a bad variable, PostgreSQL unreachable): one fatal line in the log's shape, exit 1. */
export function bootFailed(config: Pick<AppConfig, 'LOG_LEVEL'> | undefined, err: unknown): never {
  createLogger(config?.LOG_LEVEL ?? 'log').fatal({
    msg: `boot failed: ${err instanceof Error ? err.message : String(err)}`,
    context: 'boot',
  });
  process.exit(1);
}
