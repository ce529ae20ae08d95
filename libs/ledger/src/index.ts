export { LedgerModule, LedgerHttpModule } from './ledger.module';
export { StepsRepriced } from './events';
export type { StepRepriced } from './events';
export { priceStep } from './pricing/price-step';
export { ProjectsService } from './projects/projects.service';
export { CheckGuard } from './check-guard/check-guard.command';
export { ScopeUsageReport } from './check-guard/scope-usage-report.query';
export { ReservationsService } from './reservations/reservations.service';
export { Repricer } from './reprice/repricer';
export type { RepriceSummary } from './reprice/reprice-decision';
export { repriceSchema } from './reprice/reprice.schemas';
// The CLI drives the same services, handlers and validation as the HTTP routes.
export { createProjectSchema, projectSettingsSchema, createKeySchema } from './projects/projects.schemas';
export { PoliciesService } from './policies/policies.service';
export { PricesService } from './prices/prices.service';
export { putPriceSchema } from './prices/prices.controller';
export { verifyLedger } from './verify/verify-ledger.sql';
export type { LedgerDifference } from './verify/verify-ledger.sql';
export { GuardTuning } from './check-guard/batching/guard-tuning';
