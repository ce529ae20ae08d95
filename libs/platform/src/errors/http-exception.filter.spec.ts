import { Logger, type ArgumentsHost } from '@nestjs/common';
import { HttpExceptionFilter } from './http-exception.filter';

/** What a client sees for each kind of failure: load and outages as 503 with Retry-After, never 500. */
describe('HttpExceptionFilter', () => {
  // The unexpected error's log line is the filter's business, not this spec's output.
  beforeAll(() => Logger.overrideLogger(false));
  afterAll(() => Logger.overrideLogger(['log', 'error', 'warn']));

  function answer(exception: unknown) {
    const sent: { status?: number; headers: Record<string, string>; body?: unknown } = { headers: {} };
    const reply = {
      status: (s: number) => ((sent.status = s), reply),
      header: (k: string, v: string) => ((sent.headers[k.toLowerCase()] = String(v)), reply),
      send: (b: unknown) => ((sent.body = b), reply),
    };
    const host = { switchToHttp: () => ({ getResponse: () => reply, getRequest: () => ({}) }) } as ArgumentsHost;
    new HttpExceptionFilter().catch(exception, host);
    return sent;
  }
  const pg = (code: string) => Object.assign(new Error(`pg ${code}`), { code });

  it.each([
    ['a deadlock still reported after the retries', '40P01'],
    ['a serialization failure', '40001'],
    ['a lock wait past lock_timeout', '55P03'],
    ['a statement past statement_timeout', '57014'],
    ['PostgreSQL at max_connections', '53300'],
  ])('%s is busy: 503 with Retry-After', (_, code) => {
    const sent = answer(pg(code));
    expect(sent.status).toBe(503);
    expect(sent.headers['retry-after']).toBe('1');
    expect(sent.body).toMatchObject({ statusCode: 503, code: 'unavailable', message: expect.stringMatching(/^Busy/) });
  });

  it('PostgreSQL unreachable is unavailable: 503 with Retry-After', () => {
    const sent = answer(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    expect(sent.status).toBe(503);
    expect(sent.headers['retry-after']).toBe('1');
  });

  it('anything unexpected is a 500 that says nothing of its internals', () => {
    const sent = answer(pg('42P01'));
    expect(sent.status).toBe(500);
    expect(sent.body).toEqual({ statusCode: 500, code: 'internal', message: 'Internal error' });
  });
});
