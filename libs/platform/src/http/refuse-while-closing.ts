import type { FastifyInstance } from 'fastify';

/**
 * While the instance closes, a request that still arrives (pipelined, or on a keep-alive connection
 * that was busy) is refused with 503 + Retry-After in the documented error body. Fastify's own
 * `return503OnClosing` answers another shape (`{ error, message, statusCode }`); it must be off
 * (`return503OnClosing: false`) for this hook to be the one that answers.
 */
export function refuseWhileClosing(fastify: FastifyInstance): void {
  let closing = false;
  fastify.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  fastify.addHook('onRequest', (_req, reply, done) => {
    if (!closing) return done();
    void reply.status(503).header('retry-after', '1').header('connection', 'close').send({
      statusCode: 503,
      code: 'unavailable',
      message: 'This instance is shutting down; retry after the Retry-After header',
    });
  });
}
