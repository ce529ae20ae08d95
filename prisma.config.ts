import { defineConfig } from 'prisma/config';

// `prisma generate` never starts the schema engine, but Prisma 7 insists that one exists and
// tries to download it otherwise — which fails on machines that only reach the npm registry.
// Any executable satisfies the check; migrations are applied by our own runner (see
// libs/database/src/migrate.ts), which keeps Prisma's `_prisma_migrations` bookkeeping.
process.env.PRISMA_SCHEMA_ENGINE_BINARY ??= process.execPath;

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate' },
});
