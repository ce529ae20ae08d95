import type { MetricObjectWithValues, MetricValue, Registry } from 'prom-client';

/** Labels whose values name a tenant (a project id, an exporter's name). */
const TENANT_LABELS = new Set(['project', 'exporter']);

type Values = MetricObjectWithValues<MetricValue<string> & { metricName?: string }>;
/** What prom-client's registry formats (its own method, untyped in its declarations). */
type Formattable = { get(): Promise<Values> | Values; labelNames?: readonly string[]; name: string };
type Formatter = { getMetricsAsString(metric: Pick<Formattable, 'get'>): Promise<string> };

/**
 * A metric's series without its tenant labels: series that differ only in them become one, the
 * largest value for an age (`…_seconds`, e.g. the oldest undelivered event), else the sum
 * (events behind, paused exporters, dead letters). With nothing to combine the value is 0.
 */
export function withoutTenantLabels(metric: Values, labelNames: readonly string[]): Values {
  const combine = metric.name.endsWith('_seconds') ? Math.max : (a: number, b: number) => a + b;
  const series = new Map<string, MetricValue<string> & { metricName?: string }>();
  for (const v of metric.values) {
    const labels = Object.fromEntries(Object.entries(v.labels).filter(([k]) => !TENANT_LABELS.has(k)));
    const key = JSON.stringify([v.metricName ?? '', Object.entries(labels).sort(([a], [b]) => a.localeCompare(b))]);
    const seen = series.get(key);
    if (seen) seen.value = combine(seen.value, v.value);
    else series.set(key, { ...v, labels });
  }
  if (series.size === 0 && labelNames.every((l) => TENANT_LABELS.has(l))) series.set('', { value: 0, labels: {} });
  const scope = labelNames.filter((l) => TENANT_LABELS.has(l)).join(' and ');
  const how = combine === Math.max ? 'largest' : 'sum';
  return {
    ...metric,
    help: `${metric.help} (${how} over every ${scope}; per ${scope} with METRICS_TENANT_LABELS=on)`,
    values: [...series.values()],
  };
}

/**
 * The registry in Prometheus text format; unless `tenantLabels`, without a project id or exporter
 * name anywhere (what anyone who can reach the port may see: /metrics is often scraped openly).
 */
export async function exposition(registry: Registry, tenantLabels: boolean): Promise<string> {
  if (tenantLabels) return registry.metrics();
  const formatter = registry as unknown as Formatter;
  const texts = await Promise.all(
    (registry.getMetricsAsArray() as unknown as Formattable[]).map(async (metric) => {
      const labelNames = metric.labelNames ?? [];
      if (!labelNames.some((l) => TENANT_LABELS.has(l))) return formatter.getMetricsAsString(metric);
      const values = await metric.get();
      return formatter.getMetricsAsString({ get: () => withoutTenantLabels(values, labelNames) });
    }),
  );
  return `${texts.join('\n\n')}\n`;
}
