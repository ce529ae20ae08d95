import { Injectable } from '@nestjs/common';
import type { GuardCheckRequest, GuardFinding, Scope } from '@tollgate/contracts';
import { CACHE_CHANNELS, notifySql, PrismaService, type Sql } from '@tollgate/database';
import { alertsFired } from '@tollgate/telemetry/metrics';
import { Clock } from '@tollgate/platform';
import { DEFAULT_ALERT_HYSTERESIS } from '@tollgate/contracts';
import { ProjectSettingsReader } from '../project-settings/project-settings.reader';
import type { ProjectSettings } from '../project-settings/project-settings.sql';
import { readScopeUsage, type UsageRequest } from '../scope-usage/read-scope-usage.sql';
import type { UsageTotals } from '../budgets/guard-decision';
import { readCounterBounds } from './counter-bounds.sql';
import {
  alertingScopes,
  decideAlerts,
  policiesAlert,
  policyAlerts,
  requestAlerts,
  stateKey,
  type AlertState,
  type StepContribution,
} from './alert-decision';
import {
  alertOpeningStatements,
  commitAlertOutcome,
  fireExhausted,
  mergeStates,
  registerRequestAlerts,
  statesOf,
  writeAlertOutcome,
  type Exhaustion,
} from './alert-state.sql';

/** Bounds an alerting commit's lock waits and statements (64 agents on one scope take turns). */
const COMMIT_TIMEOUT_MS = 30_000;

const scopeOf = (scopeKey: string) => scopeKey.slice(0, scopeKey.indexOf(':')) as Scope;

/** The alerts that a commit may change: armed thresholds (may fire), fired ones that may re-arm. */
const live = (s: AlertState) => (s.kind === 'threshold' ? !s.fired || s.window !== null : s.fired);

/**
 * Budget alerts, decided in the transaction of the commit that moved the usage (ingest, reprice)
 * or of the denial (the guard). A project with no alert thresholds and no alert states keeps
 * ingest's single statement: {@link BudgetAlerts.applies} is false and nothing here runs.
 */
@Injectable()
export class BudgetAlerts {
  /** Request thresholds this process registered, with their limit (see register). */
  private readonly registered = new Map<string, string>();

  constructor(
    private readonly prisma: PrismaService,
    private readonly clock: Clock,
    private readonly settings: ProjectSettingsReader,
  ) {}

  /** Whether a commit of this project must decide alerts. */
  applies(settings: ProjectSettings | null): settings is ProjectSettings {
    return settings !== null && (policiesAlert(settings.policies) || settings.alertStates === true);
  }

  /** The scopes whose commits take alert locks: a policy's thresholds, or a request's. */
  private alertingScopes(settings: ProjectSettings): Set<string> {
    return new Set([...alertingScopes(settings.policies), ...(settings.requestAlertScopes ?? [])]);
  }

  /**
   * A check's request limits with `alerts`: their thresholds become armed alert states, which the
   * commits of the scope's steps then decide like a policy's. Written once per change (a process
   * remembers what it registered), so a check repeating the same limits adds no write.
   */
  async register(projectId: string, request: GuardCheckRequest, settings: ProjectSettings): Promise<void> {
    if (!request.limits?.some((l) => l.alerts?.length)) return;
    const fresh = requestAlerts(request.limits, request.context, settings.money.base).filter((s) => {
      const key = `${projectId}\u001f${stateKey(s)}`;
      const sig = `${s.limit}\u001f${s.unit}\u001f${s.hysteresis}`;
      if (this.registered.get(key) === sig) return false;
      if (this.registered.size > 100_000) this.registered.clear();
      this.registered.set(key, sig);
      return true;
    });
    if (!fresh.length) return;
    const known = new Set(settings.requestAlertScopes ?? []);
    try {
      await registerRequestAlerts(this.prisma.sql, projectId, fresh);
    } catch (err) {
      for (const s of fresh) this.registered.delete(`${projectId}\u001f${stateKey(s)}`);
      throw err;
    }
    // A scope's first request thresholds: every replica's commits must lock it from now on.
    if (!settings.alertStates || fresh.some((s) => !known.has(scopeOf(s.scopeKey))))
      await this.announce(this.prisma.sql, projectId);
  }

  /**
   * Runs `write` (the commit's own statements) in a transaction that first takes the alert locks
   * of `scopeKeys` with a threshold policy and reads their alert states, then reads the usage
   * after `write`, decides what crossed (see decideAlerts) and commits the states and the
   * `BudgetThresholdCrossed` events with it.
   */
  async commit<T>(
    projectId: string,
    settings: ProjectSettings,
    scopeKeys: readonly string[],
    write: (tx: Sql) => Promise<{ result: T; steps: StepContribution[] }>,
  ): Promise<T> {
    const alerting = this.alertingScopes(settings);
    const lockKeys = scopeKeys.filter((k) => alerting.has(scopeOf(k)));
    const opening = alertOpeningStatements(projectId, lockKeys, scopeKeys);
    return this.prisma.transaction(
      async (tx, opened) => {
        const { result, steps } = await write(tx);
        await this.decide(tx, projectId, settings, statesOf(opened[opened.length - 1]), steps, (changed, events, now) =>
          commitAlertOutcome(tx, projectId, changed, events, now),
        );
        return result;
      },
      COMMIT_TIMEOUT_MS,
      opening,
    );
  }

  /**
   * The same, inside a transaction the caller holds and commits (a reprice's batch): the locks
   * and states of `scopeKeys` first (before `write` takes any counter row, as ingest does), then
   * `write`, which returns what its steps added.
   */
  async decideIn(
    tx: Sql,
    projectId: string,
    settings: ProjectSettings,
    scopeKeys: readonly string[],
    write: () => Promise<StepContribution[]>,
  ): Promise<void> {
    const alerting = this.alertingScopes(settings);
    const statements = alertOpeningStatements(
      projectId,
      scopeKeys.filter((k) => alerting.has(scopeOf(k))),
      scopeKeys,
    );
    for (const lock of statements.slice(0, -1)) await tx.query(lock);
    const stored = statesOf(await tx.query(statements[statements.length - 1]));
    const steps = await write();
    await this.decide(tx, projectId, settings, stored, steps, (changed, events, now) =>
      writeAlertOutcome(tx, projectId, changed, events, now),
    );
  }

  private async decide(
    tx: Sql,
    projectId: string,
    settings: ProjectSettings,
    stored: AlertState[],
    steps: StepContribution[],
    write: (changed: AlertState[], events: ReturnType<typeof decideAlerts>['events'], now: Date) => Promise<string[]>,
  ) {
    const touched = new Set(steps.flatMap((s) => s.scopeKeys));
    const states = mergeStates(
      policyAlerts(settings.policies, touched, settings.money.base),
      stored.filter((s) => touched.has(s.scopeKey)),
    ).filter(live);
    if (!states.length) return;
    const now = this.clock.now();
    const requests = new Map<string, UsageRequest>();
    for (const s of states) {
      const scope = scopeOf(s.scopeKey);
      requests.set(`${s.scopeKey}@${s.window}`, {
        scope,
        scopeId: s.scopeKey.slice(scope.length + 1),
        window: s.window,
      });
    }
    // The counters bound the usage: when the alerts change at neither bound, they do not change
    // (firing and re-arming are monotone in usage), and the log's edges need not be read.
    const bounds = await readCounterBounds(tx, projectId, [...requests.values()], now);
    const unchanged = (u: Map<string, UsageTotals>) => {
      const o = decideAlerts(states, u, steps, settings.money, now);
      return !o.changed.length && !o.events.length;
    };
    if (unchanged(bounds.lower) && unchanged(bounds.upper)) return;
    const usage = await readScopeUsage(tx, projectId, [...requests.values()], now);
    const { changed, events } = decideAlerts(states, usage, steps, settings.money, now);
    if (!changed.length && !events.length) return;
    if (!settings.alertStates) await this.announce(tx, projectId);
    const written = await write(changed, events, now);
    if (written.length) alertsFired.inc({ kind: 'BudgetThresholdCrossed' }, written.length);
  }

  /**
   * A denial's hard limits, each alerted once (`BudgetExhausted`) until its usage falls back. The
   * hysteresis is the policy's, or the default for a request's limit.
   */
  async exhausted(
    db: Sql,
    projectId: string,
    settings: ProjectSettings,
    denials: readonly { violations: readonly GuardFinding[]; stepId: string | null }[],
  ): Promise<void> {
    const exhaustions: Exhaustion[] = [];
    for (const d of denials) {
      for (const finding of d.violations) {
        if (finding.threshold !== 'hard') continue;
        const policy = settings.policies.find((p) => `policy:${p.name}` === finding.source);
        exhaustions.push({
          finding,
          stepId: d.stepId,
          hysteresis: policy?.alert_hysteresis ?? DEFAULT_ALERT_HYSTERESIS,
        });
      }
    }
    if (!exhaustions.length) return;
    const written = await fireExhausted(db, projectId, exhaustions, this.clock.now());
    if (!written.length) return;
    alertsFired.inc({ kind: 'BudgetExhausted' }, written.length);
    if (!settings.alertStates) await this.announce(db, projectId);
  }

  /**
   * The project now has alert states: every replica's commits must look at them from now on. On
   * the writing connection, so the NOTIFY goes out when (and only if) the states commit.
   */
  private async announce(db: Sql, projectId: string) {
    await db.query(notifySql(CACHE_CHANNELS.projects), projectId);
    this.settings.evict(projectId);
  }
}
