export * from './metrics';
export { ScrapeHooks } from './scrape-hooks';
export { PrometheusModule, PrometheusHttpModule } from './prometheus.module';
