import { Injectable } from '@nestjs/common';
import type { GuardCheckRequest, GuardCheckResponse } from '@tollgate/contracts';
import { randomUUID } from 'node:crypto';
import { StepPricer } from '../estimate/step-pricer';
import { ProjectSettingsReader } from '../project-settings/project-settings.reader';
import type { ProjectSettings } from '../project-settings/project-settings.sql';
import { effectiveLimits, scopeKeysOf, shrinkOf } from '../budgets/effective-limits';
import { usageKey, type CheckCase, type EffectiveLimit } from '../budgets/guard-decision';
import type { UsageRequest } from '../scope-usage/read-scope-usage.sql';

/** A check, loaded and priced, ready to be decided. */
export interface LoadedCheck {
  request: GuardCheckRequest;
  settings: ProjectSettings;
  case: CheckCase;
  requests: UsageRequest[];
  /** What is read to decide it: its requests and the last hours of their forecasts. */
  reads: UsageRequest[];
  /** The project and the (scope, window) pairs of `reads`: checks of one shape read the same usage. */
  shape: string;
  skipped: GuardCheckResponse['skipped'];
}

const NO_SETTINGS: ProjectSettings = {
  unpricedPolicy: 'deny',
  fallback: null,
  money: { base: 'USD', rates: {} },
  maxEventAgeDays: null,
  policies: [],
  overrides: [],
};

/** Loads a check: its project's settings, the limits that apply (the request's and the policies'), its priced estimate. */
@Injectable()
export class CheckLoader {
  constructor(
    private readonly projectSettings: ProjectSettingsReader,
    private readonly pricer: StepPricer,
  ) {}

  async load(projectId: string, request: GuardCheckRequest, now: Date): Promise<LoadedCheck> {
    const settings = (await this.projectSettings.get(projectId)) ?? NO_SETTINGS;
    const { limits, skipped } = effectiveLimits(request, settings.policies, settings.money.base);
    const estimate = request.estimate ? await this.pricer.price(projectId, request.estimate, settings, now) : undefined;
    const requests = dedupe(limits);
    const reads = withLastHours(requests);
    return {
      request,
      settings,
      skipped,
      requests,
      reads,
      shape: [projectId, ...reads.map(readKey).sort()].join('\u001f'),
      case: {
        context: request.context,
        limits,
        estimate,
        shrink: shrinkOf(request),
        reserve: request.reserve && !request.dryRun,
        tentative: request.tentative === true,
        audit: !request.dryRun,
        stepId: request.stepId,
        contextKeys: scopeKeysOf(request.context),
      },
    };
  }
}

/** What a decision needs besides usage: the time, the lease, and new reservation ids. */
export const decisionContext = (at: Date, reservationTtlMs: number) => ({
  at,
  reservationTtlMs,
  newId: () => randomUUID().replace(/-/g, ''),
});

export const stepIdOf = (c: LoadedCheck) => c.request.stepId!;

export const readKey = (r: UsageRequest) => usageKey(`${r.scope}:${r.scopeId}`, r.window);

/** The (scope, window) pairs of some limits, once each. */
export function dedupe(limits: readonly EffectiveLimit[]): UsageRequest[] {
  const seen = new Map<string, UsageRequest>();
  for (const l of limits)
    seen.set(usageKey(l.scopeKey, l.window), {
      scope: l.scope,
      scopeId: l.scopeKey.slice(l.scope.length + 1),
      window: l.window,
    });
  return [...seen.values()];
}

/** Beside each windowed (scope, window), its last hour: the burn rate of the forecast. */
export function withLastHours(requests: UsageRequest[]): UsageRequest[] {
  const keys = new Set(requests.map(readKey));
  const hours = requests.filter(
    (r) => r.window !== null && r.scope !== 'run' && !keys.has(usageKey(`${r.scope}:${r.scopeId}`, '1h')),
  );
  return [
    ...requests,
    ...[
      ...new Map(hours.map((r) => [`${r.scope}:${r.scopeId}`, { ...r, window: '1h' as const, holds: false }])).values(),
    ],
  ];
}
