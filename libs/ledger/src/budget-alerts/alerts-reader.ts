import { Injectable } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import { readAlerts, type BudgetAlertView } from './read-alerts.sql';

/** The budget alerts the log holds, read back for GET /v1/alerts. */
@Injectable()
export class AlertsReader {
  constructor(private readonly prisma: PrismaService) {}

  /** The newest budget alerts of a project, optionally of one scope key. */
  list(projectId: string, scopeKey: string | undefined, limit: number): Promise<BudgetAlertView[]> {
    return readAlerts(this.prisma.sql, projectId, scopeKey, limit);
  }
}
