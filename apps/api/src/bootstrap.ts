import { DynamicModule, Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { createLogger, HttpExceptionFilter, PlatformModule, strictJsonParser, useLeanAsyncResourceBind, type AppConfig } from '@tollgate/platform';
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
    routerOptions: { maxParamLength: 1024 },
    // Reject a JSON body with __proto__ or constructor.prototype instead of silently keeping it.
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: true,
    requestTimeout: 30_000,
    logger: false,
  });
  const logger = createLogger(config.LOG_LEVEL);
  const app = await NestFactory.create<NestFastifyApplication>(RootModule.with(config, [ApiFeaturesModule, ...extraFeatures]), adapter, { logger, bodyParser: false });
  app.useGlobalFilters(new HttpExceptionFilter());
  app.enableShutdownHooks();

  const fastify = app.getHttpAdapter().getInstance();
  // JSON only: a text/plain or form body is a client mistake (415), not a string to validate
  // (Nest's own body parsers are off, so no urlencoded parser is registered).
  fastify.removeContentTypeParser('text/plain');
  fastify.removeContentTypeParser('application/json');
  fastify.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: config.INGEST_MAX_BODY_BYTES },
    strictJsonParser(fastify.getDefaultJsonParser('error', 'error') as never),
  );
  // One line per request: method, route, status, time — at debug level for successes, since
  // guard checks come by the thousand per second. Never headers: they carry keys.
  fastify.addHook('onResponse', (req, reply, done) => {
    const line = { msg: 'request', method: req.method, route: req.routeOptions.url ?? req.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 };
    if (reply.statusCode >= 400) logger.warn(line, 'http');
    else logger.debug(line, 'http');
    done();
  });
  return app;
}
