import 'reflect-metadata';
import { DynamicModule, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { applyMigrations, ensureDatabase, migrationsDir } from '@tollgate/database';
import { LedgerModule } from '@tollgate/ledger';
import { loadConfig, PlatformModule, type AppConfig } from '@tollgate/platform';
import { parseArgs } from 'node:util';
import { COMMANDS } from './commands';

@Module({})
class CliModule {
  static with(config: AppConfig): DynamicModule {
    return { module: CliModule, imports: [PlatformModule.forRoot(config), LedgerModule] };
  }
}

function help(): string {
  return ['Usage: npm run tollgate -- <command>', '', '  migrate', ...COMMANDS.map((c) => `  ${c.usage}`)].join('\n');
}

/** `npm run tollgate -- …`: operator commands for people who prefer a terminal. */
async function main(argv: string[]) {
  const config = loadConfig();
  if (argv[0] === 'migrate') {
    await ensureDatabase(config.DATABASE_URL);
    const { applied } = await applyMigrations(config.DATABASE_URL, migrationsDir());
    process.stdout.write(applied.length ? `Applied ${applied.join(', ')}\n` : 'Database is up to date\n');
    return;
  }
  const command = COMMANDS.find((c) => argv.slice(0, c.name.split(' ').length).join(' ') === c.name);
  if (!command) {
    process.stderr.write(help() + '\n');
    process.exitCode = argv.length && argv[0] !== 'help' ? 2 : 0;
    return;
  }
  const { values, positionals } = parseArgs({ args: argv.slice(command.name.split(' ').length), options: command.options, allowPositionals: true, strict: true });
  await ensureDatabase(config.DATABASE_URL);
  await applyMigrations(config.DATABASE_URL, migrationsDir());
  const ctx = await NestFactory.createApplicationContext(CliModule.with(config), { logger: ['error'] });
  try {
    await command.run(ctx, values, positionals);
  } finally {
    await ctx.close();
  }
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
