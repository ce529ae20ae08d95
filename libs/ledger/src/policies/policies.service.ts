import { Injectable } from '@nestjs/common';
import type { Policy, Scope } from '@tollgate/contracts';
import { CACHE_CHANNELS, notifySql, PrismaService } from '@tollgate/database';
import { AppError } from '@tollgate/platform';
import { ProjectSettingsReader } from '../project-settings/project-settings.reader';
import { policyView, type PolicyView } from './policy-view';

/**
 * A project's stored budgets (limits kept in micro-units), answered as the API shows them. Guard
 * checks cache a project's policies: every change is announced in its own transaction and
 * forgotten here.
 */
@Injectable()
export class PoliciesService {
  constructor(
    private readonly prisma: PrismaService,
    private readonly settings: ProjectSettingsReader,
  ) {}

  private announce(projectId: string) {
    return this.prisma.$executeRawUnsafe(notifySql(CACHE_CHANNELS.projects), projectId);
  }

  /** Creates or replaces the policy `name`. */
  async put(projectId: string, name: string, body: Policy): Promise<PolicyView> {
    const data = {
      scope: body.scope,
      window: body.window,
      maxCostMicros: body.maxCost === undefined ? null : BigInt(Math.round(body.maxCost * 1e6)),
      costUnit: body.costUnit ?? null,
      maxTotalTokens: body.maxTotalTokens === undefined ? null : BigInt(body.maxTotalTokens),
      maxInputTokens: body.maxInputTokens === undefined ? null : BigInt(body.maxInputTokens),
      maxOutputTokens: body.maxOutputTokens === undefined ? null : BigInt(body.maxOutputTokens),
      warnAtPercent: body.warnAtPercent ?? null,
      strategy: body.strategy,
      onExceed: body.onExceed ?? null,
      entityName: body.entityName ?? null,
      alerts: [...(body.alerts ?? [])].sort((a, b) => a - b),
      alertHysteresis: body.alertHysteresis ?? null,
      updatedAt: new Date(),
    };
    const [row] = await this.prisma.$transaction([
      this.prisma.policy.upsert({
        where: { projectId_name: { projectId, name } },
        create: { projectId, name, ...data },
        update: data,
      }),
      this.announce(projectId),
    ]);
    this.settings.evict(projectId);
    return policyView(row);
  }

  /** The project's policies by name, or only those on one scope. */
  async list(projectId: string, scope?: Scope): Promise<PolicyView[]> {
    const rows = await this.prisma.policy.findMany({
      where: { projectId, ...(scope === undefined ? {} : { scope }) },
      orderBy: { name: 'asc' },
    });
    return rows.map(policyView);
  }

  /** Deletes the policy `name`; not_found when the project has none of that name. */
  async remove(projectId: string, name: string): Promise<void> {
    const [{ count }] = await this.prisma.$transaction([
      this.prisma.policy.deleteMany({ where: { projectId, name } }),
      this.announce(projectId),
    ]);
    this.settings.evict(projectId);
    if (count === 0) throw new AppError('not_found', `No policy ${name} in this project`, 'name');
  }
}
