import { Query } from '@nestjs/cqrs';
import type { GuardFinding, ScopeUsage } from '@tollgate/contracts';
import type { PolicyView } from '../policies/policy-view';

/** A scope's usage against every stored policy on it, as GET /v1/guard/usage answers it. */
export interface ScopeUsageReportView {
  scopeKey: string;
  /** The policies on the scope, each with the key of its usage in `usage`. */
  policies: (PolicyView & { usageKey: string })[];
  /** As a guard check answers it: keyed `<scopeKey>@<window>`, or the run key. */
  usage: Record<string, ScopeUsage>;
  /** Limits the scope has already passed. */
  violations: GuardFinding[];
  warnings: GuardFinding[];
  /** ISO 8601: the time the usage was read. */
  asOf: string;
}

/** A scope's usage (`<scope>:<id>`) against every stored policy on it: read-only, nothing reserved or logged. */
export class ScopeUsageReport extends Query<ScopeUsageReportView> {
  constructor(
    readonly projectId: string,
    readonly scopeKey: string,
  ) {
    super();
  }
}
