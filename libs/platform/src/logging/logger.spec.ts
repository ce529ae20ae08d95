import { Logger } from '@nestjs/common';
import { PassThrough } from 'node:stream';
import { createLogger, prettyLine } from './logger';
import { RedisOutage } from './redis-outage';

function capture(level: Parameters<typeof createLogger>[0] = 'log') {
  const out = new PassThrough();
  let text = '';
  out.on('data', (d) => (text += String(d)));
  const logger = createLogger(level, { destination: out });
  return {
    logger,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    raw: () => text,
  };
}

describe('the log shape', () => {
  it('writes one JSON object per line: ISO time, level, msg as a string, context and fields', () => {
    const { logger, lines } = capture();
    logger.log({ msg: 'request', method: 'GET', status: 404 }, 'http');
    logger.warn('plain text', 'queues');
    const [a, b] = lines();
    expect(a).toEqual({
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      level: 'info',
      context: 'http',
      method: 'GET',
      status: 404,
      msg: 'request',
    });
    expect(b).toEqual({ time: expect.any(String), level: 'warn', context: 'queues', msg: 'plain text' });
  });

  it("keeps an error's stack inside its line, never as raw lines between them", () => {
    const { logger, lines, raw } = capture();
    const err = new Error('boom');
    logger.error({ msg: 'unexpected error', err }, 'http');
    logger.error('Nest style', err.stack, 'ExceptionsHandler');
    expect(raw().split('\n').filter(Boolean)).toHaveLength(2);
    const [a, b] = lines();
    expect(a).toMatchObject({
      level: 'error',
      msg: 'unexpected error',
      context: 'http',
      err: { type: 'Error', message: 'boom', stack: expect.stringContaining('logger.spec') },
    });
    expect(b).toMatchObject({
      level: 'error',
      msg: 'Nest style',
      context: 'ExceptionsHandler',
      err: { stack: err.stack },
    });
  });

  it("writes Nest's per-module and per-route start-up lines at debug only", () => {
    const info = capture('log');
    info.logger.log('Mapped {/v1/events, POST} route', 'RouterExplorer');
    info.logger.log('LedgerModule dependencies initialized', 'InstanceLoader');
    info.logger.log('tollgate started', 'tollgate');
    expect(info.lines().map((l) => l.msg)).toEqual(['tollgate started']);
    const debug = capture('debug');
    debug.logger.log('Mapped {/v1/events, POST} route', 'RouterExplorer');
    expect(debug.lines()).toEqual([
      expect.objectContaining({ level: 'debug', context: 'RouterExplorer', msg: 'Mapped {/v1/events, POST} route' }),
    ]);
  });

  it('drops what is below the level', () => {
    const { logger, lines } = capture('warn');
    logger.log('no');
    logger.debug('no');
    logger.warn('yes');
    expect(lines().map((l) => l.msg)).toEqual(['yes']);
  });

  it('reads as plain lines on a terminal', () => {
    const line = JSON.stringify({
      level: 'warn',
      time: '2026-12-01T10:00:00.000Z',
      context: 'redis',
      redis: 'redis://127.0.0.1:6379',
      msg: 'redis unreachable',
    });
    expect(prettyLine(line)).toBe('10:00:00.000 WARN  [redis] redis unreachable  redis=redis://127.0.0.1:6379');
  });
});

describe('a Redis outage', () => {
  afterEach(() => Logger.overrideLogger(false));

  it('is one warning when it goes, whatever the number of clients and retries, and one line when it is back', () => {
    const { logger, lines } = capture();
    Logger.overrideLogger(logger);
    const outage = new RedisOutage();
    outage.watch('redis://:secret@127.0.0.1:6379');
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
    for (let i = 0; i < 18; i++) expect(outage.failed(refused, `queue ${i % 3}`)).toBe(true);
    expect(outage.failed(new Error('ERR unknown command'))).toBe(false);
    outage.ready();
    outage.ready();
    expect(lines()).toEqual([
      expect.objectContaining({
        level: 'warn',
        context: 'redis',
        redis: 'redis://:***@127.0.0.1:6379',
        error: 'connect ECONNREFUSED 127.0.0.1:6379',
        msg: expect.stringContaining('redis unreachable'),
      }),
      expect.objectContaining({ level: 'info', context: 'redis', msg: 'redis is back', downMs: expect.any(Number) }),
    ]);
  });
});
