export * from './metrics';
export { ScrapeHooks } from './scrape-hooks';
export { ObservabilityModule, ObservabilityHttpModule } from './observability.module';
