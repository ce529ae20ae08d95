export { LedgerModule, LedgerHttpModule } from './ledger.module';
export { AppendEvents } from './append-events/append-events.command';
export { EventType, StepUsageRecorded } from './events';
export { priceStep, normalizeProvider, normalizeModel, overrideAt } from './pricing/price-step';
export type { PricedCost, PriceOverrideRate } from './pricing/price-step';
export { ProjectsService } from './projects/projects.service';
export { CheckGuard } from './check-guard/check-guard.command';
export { ReservationsService } from './reservations/reservations.service';
