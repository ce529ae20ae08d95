import 'reflect-metadata';
import { DynamicModule, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { applyMigrations, ensureDatabase, migrationsDir } from '@tollgate/database';
import { ExportersModule } from '@tollgate/exporters';
import { LedgerModule } from '@tollgate/ledger';
import {
  AppError,
  createLogger,
  loadConfig,
  PlatformModule,
  redactUrl,
  RedisClient,
  type AppConfig,
} from '@tollgate/platform';
import { parseArgs } from 'node:util';
import { COMMANDS, UsageError, type CliCommand } from './commands';
import { doctor, doctorText } from './doctor';
import { print } from './output';

/** The API's domain modules without their controllers: the CLI calls the same services and handlers. */
@Module({})
class CliModule {
  static with(config: AppConfig): DynamicModule {
    return { module: CliModule, imports: [PlatformModule.forRoot(config), LedgerModule, ExportersModule] };
  }
}

const BUILT_IN = [
  { name: 'migrate', usage: 'migrate   (create the database if missing, apply pending migrations)' },
  { name: 'doctor', usage: 'doctor   (PostgreSQL, Redis, migrations, secret key, admin token: each ok or what to do)' },
  { name: 'help', usage: 'help [<command>]' },
];

export function usage(command?: { usage: string }): string {
  if (command) return `Usage: npm run tollgate -- ${command.usage} [--json]`;
  const groups = [...BUILT_IN, ...COMMANDS].map((c) => `  ${c.usage}`);
  return [
    'Usage: npm run tollgate -- <command> [options] [--json]',
    '',
    'Commands:',
    ...groups,
    '',
    'Every command acts on DATABASE_URL (named on stderr); --json prints one JSON document for scripts.',
  ].join('\n');
}

function find(argv: string[]): CliCommand | undefined {
  return COMMANDS.filter((c) => argv.slice(0, c.name.split(' ').length).join(' ') === c.name).sort(
    (a, b) => b.name.length - a.name.length,
  )[0];
}

/**
 * Exit codes: 0 done, 1 the command failed (its reason on stderr) or found what it checks for (verify's
 * differences, on stdout), 2 a mistake in the command line.
 */
async function main(argv: string[]): Promise<number> {
  const [first] = argv;
  if (!first || first === 'help' || first === '--help' || first === '-h') {
    const topic = argv.length > 1 ? find(argv.slice(1)) : undefined;
    process.stdout.write(usage(topic) + '\n');
    return 0;
  }
  if (first === 'doctor') {
    const { values } = parseCommandArgs(argv.slice(1), {}, usage(BUILT_IN[1]));
    const checks = await doctor();
    if (values.json) print({ ok: checks.every((c) => c.status !== 'fail'), checks }, true);
    else process.stdout.write(doctorText(checks) + '\n');
    return checks.some((c) => c.status === 'fail') ? 1 : 0;
  }
  const command = first === 'migrate' ? undefined : find(argv);
  if (first !== 'migrate' && !command) {
    const near = COMMANDS.filter((c) => c.name.startsWith(`${first} `)).map((c) => `  ${c.usage}`);
    process.stderr.write(
      `unknown command: ${argv.slice(0, 2).join(' ')}\n\n${near.length ? `Usage: npm run tollgate -- …\n${near.join('\n')}` : usage()}\n`,
    );
    return 2;
  }
  const words = command ? command.name.split(' ').length : 1;
  const { values, positionals } = parseCommandArgs(
    argv.slice(words),
    command?.options ?? {},
    usage(command ?? BUILT_IN[0]),
  );
  const config = loadConfig();
  process.stderr.write(`database: ${redactUrl(config.DATABASE_URL)}\n`);
  await ensureDatabase(config.DATABASE_URL);
  const { applied } = await applyMigrations(config.DATABASE_URL, migrationsDir());
  if (!command) {
    if (values.json) print({ applied }, true);
    else process.stdout.write(applied.length ? `Applied ${applied.join(', ')}\n` : 'Database is up to date\n');
    return 0;
  }
  // Only errors, on stderr, in the log's shape: stdout is the command's answer.
  const ctx = await NestFactory.createApplicationContext(CliModule.with(config), {
    logger: createLogger('error', { destination: process.stderr }),
  });
  let code: number | void;
  try {
    if (command.needsRedis && !(await ctx.get(RedisClient).ping(2000))) {
      throw new Error(
        `Redis at ${redactUrl(config.REDIS_URL)} does not answer: ${command.name} queues work for the worker. Start Redis or set REDIS_URL (\`npm run tollgate -- doctor\` checks everything).`,
      );
    }
    code = await command.run(ctx, values, positionals);
  } finally {
    await ctx.close();
  }
  return typeof code === 'number' ? code : 0;
}

function parseCommandArgs(args: string[], options: CliCommand['options'], help: string) {
  try {
    return parseArgs({
      args,
      options: { ...options, json: { type: 'boolean' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message.split('\n')[0]}\n\n${help}`);
  }
}

/**
 * The context opens the queues' Redis connections like the API does; a command that is over (or
 * never needed Redis) closes them while some are still handshaking, and ioredis rejects those
 * pending commands with "Connection is closed" — nothing of the command's work. Those, and a
 * Redis that is down, are not the command's failure: its answer is already printed.
 */
process.on('unhandledRejection', (reason) => {
  if (
    /Connection is closed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|Stream isn't writeable/.test(
      String((reason as Error)?.message ?? reason),
    )
  )
    return;
  process.stderr.write(`${(reason as Error)?.stack ?? String(reason)}\n`);
  process.exit(1);
});

main(process.argv.slice(2)).then(
  // Exit once the answer is written: idle pool connections and timers would otherwise hold the
  // process for seconds after the work is done.
  (code) => void process.stdout.write('', () => process.exit(code)),
  (err) => {
    if (err instanceof UsageError) {
      const command = find(process.argv.slice(2));
      process.stderr.write(
        `${err.message}${command && !err.message.includes('Usage:') ? `\n\n${usage(command)}` : ''}\n`,
      );
      process.exit(2);
    }
    // A refusal of the service (not found, conflict, not configured…) reads as the API's answer would.
    const message =
      err instanceof AppError
        ? `${err.code}: ${err.message}${err.field ? ` (field ${err.field})` : ''}`
        : err instanceof Error
          ? err.message
          : String(err);
    process.stderr.write(`${message}\n`);
    process.exit(1);
  },
);
