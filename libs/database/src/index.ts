export { PrismaService } from './prisma.service';
export { ensureDatabase, applyMigrations, migrationsDir } from './migrate';
export { EventPartitions, monthOf } from './partitions';
export { readEventsAfter, checkpointAfter, LOG_START } from './event-log-reader';
export type { Checkpoint, LoggedEvent } from './event-log-reader';
export { Prisma } from '../../../generated/prisma/client';
export { EVENT_COLUMNS, EVENT_SELECT } from './event-columns';
export { poolSql, inTransaction } from './sql';
export type { Sql } from './sql';
