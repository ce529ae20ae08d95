import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Page } from 'playwright-core';
import { ConfigError } from '@tollgate/platform';
import { webhookExporter } from '../exporters/support';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, testConfig, type RunningService } from '../support/service';

/** What the service shows without a key: /metrics, and the headers of its pages. */
const SECRET_KEY = 'exposure-spec-secret-key-0123456789';
const METRICS_TOKEN = 'metrics-token-0123456789abcdef';
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

async function withExporter(svc: RunningService): Promise<{ project: TestProject; exporter: string }> {
  const project = await createProject(svc.url);
  const exporter = `exp-${randomBytes(6).toString('hex')}`;
  const res = await call(svc.url, 'PUT', `/v1/exporters/${exporter}`, {
    token: project.key,
    body: webhookExporter('http://127.0.0.1:9/hook'),
  });
  expect([200, 201]).toContain(res.status);
  return { project, exporter };
}

async function scrape(svc: RunningService, token?: string) {
  const res = await fetch(`${svc.url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.status, text: await res.text() };
}

describe('GET /metrics', () => {
  const services: RunningService[] = [];
  afterAll(() => Promise.all(services.map((s) => s.close())));
  const start = async (env: Record<string, string> = {}) => {
    const svc = await startService({ TOLLGATE_SECRET_KEY: SECRET_KEY, ...env });
    services.push(svc);
    return svc;
  };

  it('names no project and no exporter by default: per-exporter series are summed over tenants', async () => {
    const svc = await start();
    const a = await withExporter(svc);
    const b = await withExporter(svc);
    const { status, text } = await scrape(svc);
    expect(status).toBe(200);
    for (const id of [a.project.id, b.project.id, a.exporter, b.exporter]) expect(text).not.toContain(id);
    expect(text).not.toMatch(/\{[^}]*\b(project|exporter)="/);
    // Still useful: how many exporters are paused, how far behind they are in all, the dead letters.
    expect(text).toMatch(/^tollgate_exporter_paused \d+$/m);
    expect(text).toMatch(/^tollgate_exporter_lag_events \d+$/m);
    expect(text).toMatch(/^tollgate_exporter_lag_seconds [\d.e+-]+$/m);
    expect(text).toMatch(/^tollgate_exporter_dead_letter_batches \d+$/m);
    expect(text).toMatch(/^tollgate_exporter_dead_letter_events \d+$/m);
    expect(text).toMatch(/^tollgate_db_pool_connections\{state="total"\} \d+$/m);
  });

  it('with METRICS_TENANT_LABELS=on and METRICS_TOKEN: per project and exporter, for the token only', async () => {
    const svc = await start({ METRICS_TENANT_LABELS: 'on', METRICS_TOKEN });
    const a = await withExporter(svc);
    expect((await scrape(svc)).status).toBe(401);
    const { status, text } = await scrape(svc, METRICS_TOKEN);
    expect(status).toBe(200);
    expect(text).toContain(`tollgate_exporter_lag_events{project="${a.project.id}",exporter="${a.exporter}"} `);
    expect(text).toContain(`tollgate_exporter_paused{project="${a.project.id}",exporter="${a.exporter}"} 0`);
  });

  it('refuses to boot with METRICS_TENANT_LABELS=on and no METRICS_TOKEN (tenant ids are not served openly)', () => {
    expect(() => testConfig({ METRICS_TENANT_LABELS: 'on' })).toThrow(ConfigError);
    expect(() => testConfig({ METRICS_TENANT_LABELS: 'on' })).toThrow(/METRICS_TENANT_LABELS: .*METRICS_TOKEN/);
  });

  it('refuses a wrong token of any length with 401, and throttles an address that keeps guessing', async () => {
    const svc = await start({ METRICS_TOKEN, AUTH_FAILURES_PER_ADDRESS: '5', AUTH_FAILURE_WINDOW_MS: '600000' });
    const guesses = [
      '',
      'x',
      METRICS_TOKEN.slice(0, -1),
      METRICS_TOKEN + 'x',
      'y'.repeat(METRICS_TOKEN.length),
      'z'.repeat(5000),
      'again',
    ];
    const statuses = [];
    for (const g of guesses)
      statuses.push((await fetch(`${svc.url}/metrics`, { headers: { authorization: `Bearer ${g}` } })).status);
    // '' is no bearer token at all: 401 without counting. Then 5 wrong guesses, then throttled.
    expect(statuses).toEqual([401, 401, 401, 401, 401, 401, 429]);
  });
});

describe('security headers of the dashboard and /docs', () => {
  let svc: RunningService;
  beforeAll(async () => (svc = await startService()));
  afterAll(() => svc.close());

  const PAGES = [
    '/dashboard',
    '/dashboard/assets/app.js',
    '/dashboard/assets/styles.css',
    '/dashboard/vendor/uPlot.iife.min.js',
    '/docs',
    '/docs/assets/swagger-ui-bundle.js',
    '/docs/json',
  ];

  it.each(PAGES)('%s: a strict CSP without inline script, frame-ancestors none, nosniff, no referrer', async (path) => {
    const res = await fetch(svc.url + path);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    const directives = new Map(
      csp
        .split(';')
        .map((d) => d.trim().split(/\s+/))
        .map(([name, ...values]) => [name, values]),
    );
    expect(directives.get('default-src')).toEqual(["'self'"]);
    // The /docs page may allow its one inline script by hash; nothing else inline, ever.
    const scripts = directives.get('script-src') ?? [];
    expect(scripts.filter((v) => !(path === '/docs' && /^'sha256-[A-Za-z0-9+/]+={0,2}'$/.test(v)))).toEqual(["'self'"]);
    expect(directives.get('frame-ancestors')).toEqual(["'none'"]);
    expect(directives.get('object-src')).toEqual(["'none'"]);
    expect(directives.get('base-uri')).toEqual(["'none'"]);
    expect(csp).not.toContain('unsafe-eval');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
  });

  /** A page in headless Chromium, with everything that went wrong on it: CSP violations, script errors, failed loads. */
  async function inChromium(visit: (page: Page, problems: string[]) => Promise<void>): Promise<string[]> {
    const userDataDir = mkdtempSync(join(tmpdir(), 'tollgate-csp-'));
    const context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const problems: string[] = [];
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      // Chromium reports a blocked resource, style or script as a console error ("Refused to …").
      page.on(
        'console',
        (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && problems.push(m.text()),
      );
      page.on('pageerror', (e) => problems.push(e.message));
      page.on(
        'response',
        (r) => r.status() >= 400 && !r.url().endsWith('/favicon.ico') && problems.push(`${r.status()} ${r.url()}`),
      );
      await page.addInitScript({
        content:
          "document.addEventListener('securitypolicyviolation', (e) => console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI))",
      });
      await visit(page, problems);
    } finally {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    }
    return problems;
  }

  it('/docs renders the API reference in Chromium under its CSP, without one violation', async () => {
    const problems = await inChromium(async (page) => {
      await page.goto(`${svc.url}/docs`);
      await page.waitForSelector('.opblock-summary-path', { timeout: 20_000 });
      expect(await page.locator('.opblock-summary-path', { hasText: '/v1/events' }).count()).toBeGreaterThan(0);
      // Expanding an operation renders its schemas (syntax highlighting, inline SVG icons).
      await page.locator('.opblock-summary', { hasText: '/v1/events' }).first().click();
      await page.waitForSelector('.opblock-body', { timeout: 10_000 });
      await page.waitForTimeout(300);
    });
    expect(problems).toEqual([]);
  }, 60_000);

  it('/dashboard signs in and renders its pages in Chromium under its CSP, without one violation', async () => {
    const project = await createProject(svc.url);
    await call(svc.url, 'POST', '/v1/events', {
      token: project.key,
      body: { events: [stepEvent({ resourceId: 'csp-resource' })] },
    });
    const policy = await call(svc.url, 'PUT', '/v1/policies/csp-cap', {
      token: project.key,
      body: { scope: 'resource', window: '24h', maxTotalTokens: 100_000, warnAtPercent: 50 },
    });
    expect(policy.status).toBe(200);
    const problems = await inChromium(async (page) => {
      await page.goto(`${svc.url}/dashboard`);
      await page.waitForSelector('#view[data-state=sign-in]');
      await page.fill('#key', project.key);
      await page.click('#sign-in-form button[type=submit]');
      await page.waitForSelector('#view[data-state=ready]');
      // The scope page draws its meters with style attributes and its charts with uPlot.
      for (const hash of ['#/scope/resource/csp-resource?w=24h', '#/budgets']) {
        await page.goto(`${svc.url}/dashboard${hash}`);
        await page.waitForSelector(`#view[data-state=ready][data-hash="${hash}"]`);
      }
      expect(await page.locator('.meter .fill').count()).toBeGreaterThan(0);
      expect(
        await page
          .locator('.meter .fill')
          .first()
          .evaluate((el) => (el as unknown as { style: { width: string } }).style.width),
      ).toMatch(/%$/);
    });
    expect(problems).toEqual([]);
  }, 60_000);
});
