export { LedgerModule, LedgerHttpModule } from './ledger.module';
export { AppendEvents } from './append-events/append-events.command';
export { StepsRepriced } from './events';
export type { StepCost, StepRepriced } from './events';
export { priceStep, normalizeProvider, normalizeModel, overrideAt } from './pricing/price-step';
export type { PricedCost, PriceOverrideRate } from './pricing/price-step';
export { ProjectsService } from './projects/projects.service';
export { CheckGuard } from './check-guard/check-guard.command';
export { ReservationsService } from './reservations/reservations.service';
export { Repricer, REPRICE_BATCH_SIZE } from './reprice/repricer';
export type { RepriceRequest, RepriceOptions } from './reprice/repricer';
export type { RepriceSummary } from './reprice/reprice-decision';
export { repriceSchema } from './reprice/reprice.schemas';
// The CLI drives the same handlers and validation as the HTTP routes.
export { createProjectSchema, projectSettingsSchema, createKeySchema } from './projects/projects.schemas';
export { PoliciesController } from './policies/policies.controller';
export { PricesController, putPriceSchema } from './prices/prices.controller';
export { GuardController } from './check-guard/guard.controller';
