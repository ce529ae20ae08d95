import type { CommandBus } from '@nestjs/cqrs';
import type { GuardCheckResponse } from '@tollgate/contracts';
import type { PoliciesService } from '../policies/policies.service';
import type { PolicyView } from '../policies/policy-view';
import type { CheckGuard } from './check-guard.command';
import { ScopeUsageReportHandler } from './scope-usage-report.handler';
import { ScopeUsageReport } from './scope-usage-report.query';

const policy = (name: string, over: Partial<PolicyView> = {}): PolicyView => ({
  name,
  scope: 'resource',
  window: '24h',
  maxCost: 5,
  costUnit: undefined,
  maxTotalTokens: undefined,
  maxInputTokens: undefined,
  maxOutputTokens: undefined,
  warnAtPercent: undefined,
  strategy: 'block',
  onExceed: undefined,
  entityName: undefined,
  alerts: undefined,
  alertHysteresis: undefined,
  updatedAt: '2026-06-10T00:00:00.000Z',
  ...over,
});

/** A dry run's answer for its entity: one usage key and one violation naming the entity. */
const answerOf = (check: CheckGuard): GuardCheckResponse => {
  const entity = check.request.context.entityName ?? '-';
  return {
    decision: 'deny',
    violations: [{ source: `for ${entity}` } as GuardCheckResponse['violations'][number]],
    warnings: [],
    skipped: [],
    usage: { [`resource:r1@${entity}`]: {} as GuardCheckResponse['usage'][string] },
    asOf: '2026-06-10T12:00:00.000Z',
  };
};

function handlerWith(policies: PolicyView[]) {
  const checks: CheckGuard[] = [];
  const commands = {
    execute: (check: CheckGuard) => {
      checks.push(check);
      return Promise.resolve(answerOf(check));
    },
  } as unknown as CommandBus;
  const service = { list: () => Promise.resolve(policies) } as unknown as PoliciesService;
  return { handler: new ScopeUsageReportHandler(commands, service), checks };
}

describe('ScopeUsageReportHandler', () => {
  it('dry-runs the scope once per entity its policies name, and merges what they answer', async () => {
    const { handler, checks } = handlerWith([
      policy('daily'),
      policy('planner-hourly', { window: '1h', entityName: 'planner' }),
      policy('planner-daily', { entityName: 'planner' }),
    ]);
    const report = await handler.execute(new ScopeUsageReport('p1', 'resource:r1'));

    expect(checks.map((c) => [c.projectId, c.request.context, c.request.dryRun, c.request.reserve])).toEqual([
      ['p1', { resourceId: 'r1' }, true, false],
      ['p1', { resourceId: 'r1', entityName: 'planner' }, true, false],
    ]);
    expect(report.policies.map((p) => [p.name, p.usageKey])).toEqual([
      ['daily', 'resource:r1@24h'],
      ['planner-hourly', 'resource:r1@1h'],
      ['planner-daily', 'resource:r1@24h'],
    ]);
    expect(Object.keys(report.usage)).toEqual(['resource:r1@-', 'resource:r1@planner']);
    expect(report.violations.map((v) => v.source)).toEqual(['for -', 'for planner']);
    expect(report).toMatchObject({ scopeKey: 'resource:r1', warnings: [], asOf: '2026-06-10T12:00:00.000Z' });
  });

  it('still reads a scope with no policy, and keys a run policy by the run itself', async () => {
    const none = handlerWith([]);
    expect((await none.handler.execute(new ScopeUsageReport('p1', 'user:u:1'))).policies).toEqual([]);
    expect(none.checks.map((c) => c.request.context)).toEqual([{ userId: 'u:1' }]);

    const run = handlerWith([policy('per-run', { scope: 'run' })]);
    const report = await run.handler.execute(new ScopeUsageReport('p1', 'run:t1'));
    expect(report.policies.map((p) => p.usageKey)).toEqual(['run:t1']);
    expect(run.checks.map((c) => c.request.context)).toEqual([{ traceId: 't1' }]);
  });
});
