import type { LoggerService, LogLevel } from '@nestjs/common';
import pino, { type Logger as Pino } from 'pino';
import { Writable } from 'node:stream';

/** Nest's levels, most severe first, and the pino level each is written at. */
const ORDER: LogLevel[] = ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'];
const PINO_LEVEL: Record<LogLevel, pino.Level> = {
  fatal: 'fatal',
  error: 'error',
  warn: 'warn',
  log: 'info',
  debug: 'debug',
  verbose: 'trace',
};

/**
 * Nest's own start-up chatter (a line per module and per route, ~70 in all) is written at debug:
 * what a user needs from start-up is the line saying where things are.
 */
const CHATTY_CONTEXTS = new Set([
  'NestFactory',
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestApplication',
]);

export interface LoggerOptions {
  /** Where lines go (default stdout). */
  destination?: NodeJS.WritableStream;
  /** Human-readable lines instead of JSON (default: when stdout is a terminal). */
  pretty?: boolean;
}

/**
 * The one log shape of every process: one JSON object per line with `time` (ISO 8601), `level`
 * (`fatal` … `trace`), `msg` (a string), `context` (who logs) and the fields logged with it —
 * or, when stdout is a terminal, the same as readable lines. An error's stack is a field of its
 * line (`err.stack`), never raw lines of its own between the JSON lines.
 */
export class TollgateLogger implements LoggerService {
  readonly pino: Pino;

  constructor(level: LogLevel = 'log', options: LoggerOptions = {}) {
    const destination = options.destination ?? pino.destination({ dest: 1, sync: true });
    const pretty = options.pretty ?? (options.destination ? false : process.stdout.isTTY === true);
    this.pino = pino(
      {
        level: PINO_LEVEL[level],
        base: undefined,
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }) },
        serializers: { err: pino.stdSerializers.err },
      },
      pretty
        ? prettyStream(destination as NodeJS.WritableStream, !options.destination && process.stdout.isTTY === true)
        : destination,
    );
  }

  log(message: unknown, ...params: unknown[]): void {
    this.write('log', message, params);
  }
  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]): void {
    this.write('verbose', message, params);
  }
  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params);
  }
  setLogLevels(levels: LogLevel[]): void {
    const lowest = ORDER.filter((l) => levels.includes(l)).pop();
    if (lowest) this.pino.level = PINO_LEVEL[lowest];
  }

  /**
   * Nest calls `(message, ...params, context)`: a Logger made with a context appends it, and
   * `error` may carry a stack string before it. A message may be a string, an Error or an object
   * with `msg` and fields.
   */
  private write(level: LogLevel, message: unknown, params: unknown[]): void {
    const rest = [...params];
    const context =
      rest.length && typeof rest[rest.length - 1] === 'string' && !isStack(rest[rest.length - 1])
        ? (rest.pop() as string)
        : undefined;
    const pinoLevel = level === 'log' && context && CHATTY_CONTEXTS.has(context) ? 'debug' : PINO_LEVEL[level];
    if (!this.pino.isLevelEnabled(pinoLevel)) return;
    const fields: Record<string, unknown> = context ? { context } : {};
    let msg: string;
    if (message instanceof Error) {
      msg = message.message;
      fields.err = message;
    } else if (message !== null && typeof message === 'object') {
      const { msg: m, message: mm, ...others } = message as Record<string, unknown>;
      Object.assign(fields, others);
      msg = typeof m === 'string' ? m : typeof mm === 'string' ? mm : (context ?? '');
    } else {
      msg = String(message);
    }
    for (const p of rest) {
      if (p instanceof Error) fields.err = p;
      else if (isStack(p)) fields.err = { stack: p };
      else if (p !== undefined) ((fields.details ??= []) as unknown[]).push(p);
    }
    this.pino[pinoLevel](fields, msg);
  }
}

const isStack = (v: unknown): v is string => typeof v === 'string' && /\n\s+at /.test(v);

/** A logger for any process (API, worker, CLI): JSON lines at or above `level`. */
export function createLogger(level: LogLevel = 'log', options: LoggerOptions = {}): TollgateLogger {
  return new TollgateLogger(level, options);
}

const COLORS: Record<string, string> = {
  fatal: '\x1b[41m',
  error: '\x1b[31m',
  warn: '\x1b[33m',
  info: '\x1b[32m',
  debug: '\x1b[36m',
  trace: '\x1b[90m',
};

/** `12:04:05.123 INFO  [context] msg  key=value …` — multi-field lines (the start line) one field per line. */
export function prettyLine(line: string, colors = false): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line);
  } catch {
    return line;
  }
  const { time, level, msg, context, err, ...fields } = record as {
    time?: string;
    level?: string;
    msg?: string;
    context?: string;
    err?: { stack?: string; message?: string };
  };
  const label = String(level ?? '')
    .toUpperCase()
    .padEnd(5);
  const head = `${String(time ?? '').slice(11, 23)} ${colors ? `${COLORS[String(level)] ?? ''}${label}\x1b[0m` : label} ${context ? `[${context}] ` : ''}${msg ?? ''}`;
  const entries = Object.entries(fields).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)] as const);
  const body =
    entries.length > 4
      ? entries.map(([k, v]) => `\n    ${k.padEnd(14)} ${v}`).join('')
      : entries.map(([k, v]) => `  ${k}=${v}`).join('');
  const stack = err?.stack
    ? `\n    ${err.stack.split('\n').join('\n    ')}`
    : err?.message
      ? `  err=${err.message}`
      : '';
  return `${head}${body}${stack}`;
}

function prettyStream(out: NodeJS.WritableStream, colors: boolean): Writable {
  let pending = '';
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const l of lines) if (l) out.write(prettyLine(l, colors) + '\n');
      done();
    },
  });
}
