import { Injectable } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import { readLatency, readRun, readSteps, type StepCursor, type StepFilter } from './read-steps.sql';

/** The ledger itself, read-only: step events, a run, latency per model (see read-steps.sql.ts). */
@Injectable()
export class StepsReader {
  constructor(private readonly prisma: PrismaService) {}

  /** Step events newest first, `limit` of them after `cursor`, and the cursor of the next page. */
  steps(projectId: string, filter: StepFilter, limit: number, cursor?: StepCursor) {
    return readSteps(this.prisma.sql, projectId, filter, limit, cursor);
  }

  /** durationMs percentiles per provider and model, slowest first. */
  latency(projectId: string, filter: StepFilter, limit: number) {
    return readLatency(this.prisma.sql, projectId, filter, limit);
  }

  /** A run's steps oldest first, and the guard's events between them. */
  run(projectId: string, traceId: string, limit: number) {
    return readRun(this.prisma.sql, projectId, traceId, limit);
  }
}
