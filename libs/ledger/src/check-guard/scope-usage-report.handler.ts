import { CommandBus, QueryHandler, type IQueryHandler } from '@nestjs/cqrs';
import { guardCheckRequestSchema, SCOPE_TABLE, type Scope } from '@tollgate/contracts';
import { PoliciesService } from '../policies/policies.service';
import { CheckGuard } from './check-guard.command';
import { ScopeUsageReport, type ScopeUsageReportView } from './scope-usage-report.query';

/**
 * What a dry-run check without an estimate answers (the dashboard's, with a `read` key): the
 * scope's usage in the window of every stored policy on its scope, and the policies themselves.
 * A policy limited to one entity applies to that entity's steps, so it is evaluated with that
 * entityName; its usage is the scope's usage all the same.
 */
@QueryHandler(ScopeUsageReport)
export class ScopeUsageReportHandler implements IQueryHandler<ScopeUsageReport, ScopeUsageReportView> {
  constructor(
    private readonly commands: CommandBus,
    private readonly policies: PoliciesService,
  ) {}

  async execute({ projectId, scopeKey }: ScopeUsageReport): Promise<ScopeUsageReportView> {
    const [scope, ...rest] = scopeKey.split(':') as [Scope, ...string[]];
    const id = rest.join(':');
    const policies = await this.policies.list(projectId, scope);
    const entityNames = [...new Set(policies.map((p) => p.entityName))];
    if (!entityNames.length) entityNames.push(undefined);
    const answers = await Promise.all(
      entityNames.map((entityName) =>
        this.commands.execute(
          new CheckGuard(
            projectId,
            guardCheckRequestSchema.parse({
              context: { [SCOPE_TABLE[scope].field]: id, ...(entityName ? { entityName } : {}) },
              dryRun: true,
            }),
          ),
        ),
      ),
    );
    return {
      scopeKey,
      policies: policies.map((p) => ({ ...p, usageKey: scope === 'run' ? scopeKey : `${scopeKey}@${p.window}` })),
      usage: Object.assign({}, ...answers.map((a) => a.usage)),
      violations: answers.flatMap((a) => a.violations),
      warnings: answers.flatMap((a) => a.warnings),
      asOf: answers[0].asOf,
    };
  }
}
