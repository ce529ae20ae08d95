import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { exposition } from './exposition';

describe('exposition', () => {
  function registry() {
    const r = new Registry();
    const lag = new Gauge({
      name: 't_exporter_lag_events',
      help: 'Events behind',
      labelNames: ['project', 'exporter'],
      registers: [r],
    });
    const age = new Gauge({
      name: 't_exporter_lag_seconds',
      help: 'Age of the oldest',
      labelNames: ['project', 'exporter'],
      registers: [r],
    });
    const paused = new Gauge({
      name: 't_exporter_paused',
      help: 'Paused',
      labelNames: ['project', 'exporter'],
      registers: [r],
    });
    const batches = new Counter({
      name: 't_batches_total',
      help: 'Batches',
      labelNames: ['project', 'type'],
      registers: [r],
    });
    const latency = new Histogram({
      name: 't_latency_seconds',
      help: 'Latency',
      labelNames: ['status'],
      buckets: [0.1, 1],
      registers: [r],
    });
    new Gauge({ name: 't_dead_letters', help: 'Dead letters', labelNames: ['project', 'exporter'], registers: [r] });
    lag.set({ project: 'prj_secret_a', exporter: 'acme-hook' }, 5);
    lag.set({ project: 'prj_secret_b', exporter: 'globex-hook' }, 7);
    age.set({ project: 'prj_secret_a', exporter: 'acme-hook' }, 30);
    age.set({ project: 'prj_secret_b', exporter: 'globex-hook' }, 12.5);
    paused.set({ project: 'prj_secret_a', exporter: 'acme-hook' }, 1);
    paused.set({ project: 'prj_secret_b', exporter: 'globex-hook' }, 0);
    batches.inc({ project: 'prj_secret_a', type: 'webhook' }, 2);
    batches.inc({ project: 'prj_secret_b', type: 'webhook' }, 3);
    batches.inc({ project: 'prj_secret_b', type: 'otlp' }, 1);
    latency.observe({ status: '200' }, 0.05);
    return r;
  }

  it('without tenant labels: sums counts, keeps the largest age, keeps every other label, names no tenant', async () => {
    const text = await exposition(registry(), false);
    expect(text).not.toMatch(/prj_secret|acme|globex|project=|exporter=/);
    const lines = text.split('\n').filter((l) => l && !l.startsWith('#'));
    expect(lines).toEqual(
      expect.arrayContaining([
        't_exporter_lag_events 12',
        't_exporter_lag_seconds 30',
        't_exporter_paused 1',
        't_batches_total{type="webhook"} 5',
        't_batches_total{type="otlp"} 1',
        't_dead_letters 0',
        't_latency_seconds_bucket{le="0.1",status="200"} 1',
        't_latency_seconds_count{status="200"} 1',
      ]),
    );
    expect(text).toContain(
      '# HELP t_exporter_lag_seconds Age of the oldest (largest over every project and exporter; per project and exporter with METRICS_TENANT_LABELS=on)',
    );
    expect(text).toContain('# TYPE t_batches_total counter');
  });

  it('with tenant labels: exactly what prom-client serves', async () => {
    const r = registry();
    expect(await exposition(r, true)).toBe(await r.metrics());
    expect(await exposition(r, true)).toContain('t_exporter_lag_events{project="prj_secret_a",exporter="acme-hook"} 5');
  });

  it('leaves metrics without tenant labels byte for byte as they were', async () => {
    const r = new Registry();
    const g = new Gauge({
      name: 'x_pool',
      help: 'Pool "connections"\nby state',
      labelNames: ['state'],
      registers: [r],
    });
    g.set({ state: 'idle "quoted"' }, 3);
    expect(await exposition(r, false)).toBe(await r.metrics());
  });
});
