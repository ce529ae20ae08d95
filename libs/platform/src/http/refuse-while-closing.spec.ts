import Fastify from 'fastify';
import { connect } from 'node:net';
import { refuseWhileClosing } from './refuse-while-closing';

describe('refuseWhileClosing', () => {
  it('answers a request that arrives while the server closes with 503 in the error body', async () => {
    const fastify = Fastify({ return503OnClosing: false });
    refuseWhileClosing(fastify);
    let closing!: () => void;
    const closed = new Promise<void>((resolve) => (closing = resolve));
    fastify.addHook('preClose', (done) => (closing(), done()));
    fastify.post('/slow', async () => ({ ok: true }));
    fastify.get('/next', async () => ({ ok: true }));
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    const { port } = fastify.server.address() as { port: number };

    // A request in flight keeps its connection open past close(); the next one on it comes after.
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    const ended = new Promise((resolve) => socket.on('close', resolve));
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('POST /slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{');
    await new Promise((resolve) => setTimeout(resolve, 50));
    const closedServer = fastify.close();
    await closed;
    socket.write('}GET /next HTTP/1.1\r\nHost: x\r\n\r\n');
    await ended;
    await closedServer;

    const answers = text.split(/(?=HTTP\/1\.1 )/);
    expect(answers[0]).toMatch(/^HTTP\/1\.1 200/);
    expect(answers[1]).toMatch(/^HTTP\/1\.1 503/);
    expect(answers[1]).toMatch(/^retry-after: 1\r$/im);
    expect(JSON.parse(answers[1].split('\r\n\r\n')[1])).toEqual({
      statusCode: 503,
      code: 'unavailable',
      message: 'This instance is shutting down; retry after the Retry-After header',
    });
  });
});
