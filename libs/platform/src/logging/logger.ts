import { ConsoleLogger, type LogLevel } from '@nestjs/common';

const ORDER: LogLevel[] = ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'];

/** Structured JSON logs, one object per line, at or above `level`. */
export function createLogger(level: LogLevel = 'log'): ConsoleLogger {
  return new ConsoleLogger({ json: true, logLevels: ORDER.slice(0, ORDER.indexOf(level) + 1), colors: false });
}
