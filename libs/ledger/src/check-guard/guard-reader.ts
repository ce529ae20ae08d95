import { Injectable } from '@nestjs/common';
import type { Scope } from '@tollgate/contracts';
import { PrismaService } from '@tollgate/database';
import { readExceededReservations, type ExceededReservation } from '../reservations/exceeded.sql';
import { readGuardDecisions, type GuardDecisionView } from './sql/guard-decisions.sql';

/** What the guard left in the log, read back newest first: its denials and warnings, and the settlements past their reservation. */
@Injectable()
export class GuardReader {
  constructor(private readonly prisma: PrismaService) {}

  /** The newest `GuardDecided` events, optionally of one scope (`<scope>:<id>`; the run: its trace id). */
  decisions(projectId: string, scopeKey: string | undefined, limit: number): Promise<GuardDecisionView[]> {
    const [scope, ...rest] = scopeKey?.split(':') ?? [];
    const of = scope === undefined ? undefined : { scope: scope as Scope, id: rest.join(':') };
    return readGuardDecisions(this.prisma.sql, projectId, of, limit);
  }

  /** The newest `ReservationExceeded` events, optionally of one scope key. */
  exceeded(projectId: string, scopeKey: string | undefined, limit: number): Promise<ExceededReservation[]> {
    return readExceededReservations(this.prisma.sql, projectId, scopeKey, limit);
  }
}
