import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { startService, type RunningService } from '../support/service';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { TEST_ADMIN_TOKEN } from '../support/env';

/**
 * The dashboard in a real headless Chromium (Debian's `chromium`, which `.ci/run` installs), against
 * the real service with generated data: every number the page shows must be what the metric and
 * guard routes answer for the same range.
 */
jest.setTimeout(120_000);

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// Screenshots of every page, kept after the run (test/artifacts/ is gitignored); the path is printed at the end.
const ARTIFACTS = join(__dirname, '..', 'artifacts', 'dashboard');
const LOCALE = 'en-US';
const TIME_ZONE = 'America/New_York';
const HOUR = 3_600_000;
const TOKENS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];
const STEPS = ['mastra_model_total_input_tokens'];

const MODELS = [
  { provider: 'openai', model: 'gpt-4o' },
  { provider: 'openai', model: 'gpt-4o-mini' },
  { provider: 'anthropic', model: 'claude-3-5-sonnet-20241022' },
  // Two models of one family that differ only at the end of their names.
  { provider: 'anthropic', model: 'claude-3-5-sonnet-20240620' },
];
const RESOURCES = ['acme', 'globex', 'initech', 'umbrella'];
const AGENTS = ['support-agent', 'billing-agent', 'research-agent'];

// The same formats as the page's format.js, in the locale the browser is given.
const intText = (v: number) => new Intl.NumberFormat(LOCALE, { maximumFractionDigits: 0 }).format(v);
// One money format: two decimals, up to four for sub-cent digits.
const moneyText = (v: number, unit: string) =>
  new Intl.NumberFormat(LOCALE, {
    style: 'currency',
    currency: unit,
    minimumFractionDigits: 2,
    maximumFractionDigits: 4,
  }).format(v);

let service: RunningService;
let project: TestProject;
let readKey: string;
let emptyReadKey: string;
let context: BrowserContext;
let page: Page;
let dailyCap: number;
let userDataDir: string;
const pageErrors: string[] = [];

/** A deterministic spread of steps over the last 12 days, several in the last hour. */
function generatedEvents(now: number) {
  const events: Record<string, unknown>[] = [];
  for (let i = 0; i < 160; i++) {
    const ageMs = i < 12 ? (i + 1) * 4 * 60_000 : ((i * 7919) % (12 * 24 * 60)) * 60_000 + 30 * 60_000;
    const m = i % 20 === 7 ? MODELS[3] : MODELS[i % 3];
    events.push(
      stepEvent({
        occurredAt: new Date(now - ageMs).toISOString(),
        traceId: `run-${i % 40}`,
        resourceId: RESOURCES[(i * 5) % 7 < 4 ? (i * 5) % 7 : i % 2],
        userId: `user-${i % 5}`,
        threadId: `thread-${i % 9}`,
        entityName: AGENTS[i % 3 === 0 ? 0 : (i >> 1) % 3],
        ...m,
        usage: {
          inputTokens: 400 + ((i * 37) % 2600),
          outputTokens: 50 + ((i * 13) % 700),
          cacheReadTokens: i % 4 === 0 ? 200 : 0,
          reasoningTokens: i % 5 === 0 ? 40 : 0,
        },
        durationMs: 200 + ((i * 131) % 1800),
        environment: i % 2 ? 'prod' : 'staging',
        tags: i % 3 ? ['beta'] : [],
      }),
    );
  }
  return events;
}

async function metric(path: string, body: unknown) {
  const r = await call(service.url, 'POST', `/api/observability/metrics/${path}`, { token: readKey, body });
  expect(r.status).toBe(200);
  return r.body;
}

/** Top tables' default order: cost, highest first (no price last), ties by tokens, then name. */
function byCost(groups: any[], label: (d: any) => string) {
  const cost = (g: any) => (g.estimatedCost === null || g.estimatedCost === undefined ? -Infinity : g.estimatedCost);
  return [...groups].sort(
    (a, b) =>
      cost(b) - cost(a) ||
      (cost(a) === cost(b) ? b.value - a.value : 0) ||
      label(a.dimensions).localeCompare(label(b.dimensions)),
  );
}

/**
 * Waits until an expression is true in the page. Not page.waitForFunction: Playwright runs its
 * predicate through eval, which the dashboard's Content-Security-Policy (no 'unsafe-eval') refuses;
 * an evaluation from the test itself is not the page's script and is allowed.
 */
async function until(expression: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${expression}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The page for the current URL has rendered (not the one before a hash change). */
async function ready() {
  await until(
    "document.getElementById('view').dataset.state === 'ready' && document.getElementById('view').dataset.hash === location.hash",
  );
  expect(pageErrors).toEqual([]);
}

async function shownRange() {
  const el = page.locator('#view > div.grid');
  return { start: (await el.getAttribute('data-start'))!, end: (await el.getAttribute('data-end'))! };
}

const text = (testId: string) => page.getByTestId(testId).innerText();

/** Signs the tab in with `key`, signing out first when it is signed in already. */
async function signIn(key: string) {
  await page.goto(`${service.url}/dashboard`);
  await until("['sign-in', 'ready'].includes(document.getElementById('view').dataset.state)");
  if ((await page.locator('#view').getAttribute('data-state')) === 'ready') {
    await page.click('#sign-out');
    await page.waitForSelector('#view[data-state=sign-in]');
  }
  await page.fill('#key', key);
  await page.click('#sign-in-form button[type=submit]');
  await ready();
}

async function openScope(scope: string, id: string) {
  await page.goto(`${service.url}/dashboard#/scope/${scope}/${encodeURIComponent(id)}?w=24h`);
  await ready();
}

/** The overview's figures against the routes, for the range the page asked for. */
async function expectOverviewMatchesRoutes() {
  const timestamp = await shownRange();
  const totals = await metric('aggregate', {
    name: TOKENS,
    aggregation: 'sum',
    filters: { timestamp },
    comparePeriod: 'previous_period',
  });
  const steps = await metric('aggregate', { name: STEPS, aggregation: 'count', filters: { timestamp } });
  expect(totals.costUnit).toBe('USD');
  expect(await text('kpi-cost-value')).toBe(moneyText(totals.estimatedCost ?? 0, 'USD'));
  expect(Number(await page.getByTestId('kpi-cost-value').getAttribute('data-value'))).toBe(totals.estimatedCost ?? 0);
  expect(await text('kpi-tokens-value')).toBe(intText(totals.value ?? 0));
  expect(await text('kpi-steps-value')).toBe(intText(steps.value));
  if (totals.costChangePercent !== null && totals.costChangePercent !== undefined) {
    const expected = new Intl.NumberFormat(LOCALE, {
      style: 'percent',
      maximumFractionDigits: 1,
      signDisplay: 'exceptZero',
    }).format(totals.costChangePercent / 100);
    expect(await text('kpi-cost-change')).toBe(expected);
  }
  for (const [id, groupBy, label] of [
    ['models', ['provider', 'model'], (d: any) => `${d.provider} / ${d.model}`],
    ['resources', ['resourceId'], (d: any) => d.resourceId],
    ['agents', ['entityName'], (d: any) => d.entityName],
  ] as const) {
    const all = (
      await metric('breakdown', { name: TOKENS, groupBy, aggregation: 'sum', filters: { timestamp }, limit: 1000 })
    ).groups;
    const groups = byCost(all, label).slice(0, 8);
    const rows = page.getByTestId(`${id}-row`);
    expect(await rows.count()).toBe(groups.length);
    for (let i = 0; i < groups.length; i++) {
      const row = rows.nth(i);
      expect(await row.getAttribute('data-key')).toBe(label(groups[i].dimensions));
      expect(await row.locator('.tokens').innerText()).toBe(intText(groups[i].value));
      expect(await row.locator('.cost .amount').innerText()).toBe(
        moneyText(groups[i].estimatedCost, groups[i].costUnit),
      );
      expect(await row.getByTestId('unpriced').count()).toBe(groups[i].unpricedSteps ? 1 : 0);
    }
  }
  return { totals, steps };
}

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  service = await startService();
  project = await createProject(service.url, ['ingest', 'guard', 'read', 'admin']);
  const key = await call(service.url, 'POST', `/v1/admin/projects/${project.id}/keys`, {
    token: TEST_ADMIN_TOKEN,
    body: { scopes: ['read'] },
  });
  readKey = key.body.key;
  emptyReadKey = (await createProject(service.url, ['read'])).key;

  const now = Date.now();
  const ingest = await call(service.url, 'POST', '/v1/events', {
    token: project.key,
    body: { events: generatedEvents(now) },
  });
  expect(ingest.status).toBeLessThan(300);
  expect(ingest.body.accepted).toBe(160);

  // Two budgets on resources: a daily cost cap with acme at two thirds of it (past the soft threshold),
  // and a weekly token budget that only warns; then guard checks whose estimate ($0.02) does not fit in
  // acme's remaining third, so the audit has denials and warnings.
  const acmeDay = await metric('aggregate', {
    name: TOKENS,
    aggregation: 'sum',
    filters: { resourceId: 'acme', timestamp: { start: new Date(now - 24 * HOUR).toISOString() } },
  });
  dailyCap = Math.round(acmeDay.estimatedCost * 1.5 * 1e4) / 1e4;
  expect(dailyCap).toBeGreaterThan(0.01);
  expect(dailyCap).toBeLessThan(0.04);
  for (const [name, policy] of [
    ['resource-daily-cost', { scope: 'resource', window: '24h', maxCost: dailyCap, warnAtPercent: 60 }],
    [
      'resource-weekly-tokens',
      { scope: 'resource', window: '7d', maxTotalTokens: 120_000, warnAtPercent: 50, strategy: 'warn' },
    ],
  ] as const) {
    const r = await call(service.url, 'PUT', `/v1/policies/${name}`, { token: project.key, body: policy });
    expect(r.status).toBe(200);
  }
  for (const resourceId of ['acme', 'acme', 'globex']) {
    const r = await call(service.url, 'POST', '/v1/guard/check', {
      token: project.key,
      body: {
        context: { resourceId, entityName: 'support-agent', traceId: 'run-guard' },
        estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 4000, maxOutputTokens: 1000 },
      },
    });
    expect(r.status).toBe(200);
  }

  userDataDir = mkdtempSync(join(tmpdir(), 'tollgate-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    locale: LOCALE,
    timezoneId: TIME_ZONE,
    viewport: { width: 1360, height: 900 },
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (err) => pageErrors.push(err.message));
  page.on('console', (msg) => {
    if (msg.type() === 'error') pageErrors.push(msg.text());
  });
});

afterAll(async () => {
  process.stdout.write(`dashboard screenshots: ${ARTIFACTS}\n`);
  await context?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  await service?.close();
});

test('the dashboard serves itself and its chart library, with no other origin', async () => {
  const html = await fetch(`${service.url}/dashboard`);
  expect(html.status).toBe(200);
  expect(html.headers.get('content-type')).toContain('text/html');
  const lib = await fetch(`${service.url}/dashboard/vendor/uPlot.iife.min.js`);
  expect(lib.status).toBe(200);
  expect((await lib.text()).length).toBeGreaterThan(10_000);
  expect((await fetch(`${service.url}/dashboard/assets/..%2Fsrc%2Fmain.ts`)).status).toBe(404);
  expect((await fetch(`${service.url}/dashboard/vendor/package.json`)).status).toBe(404);
});

test('a read key reads the guard usage of a scope; the route answers what a dry-run check answers', async () => {
  const usage = await call(service.url, 'GET', '/v1/guard/usage?scopeKey=resource:acme', { token: readKey });
  expect(usage.status).toBe(200);
  const dry = await call(service.url, 'POST', '/v1/guard/check', {
    token: project.key,
    body: { context: { resourceId: 'acme' }, dryRun: true },
  });
  // The same usage; the forecast (when each limit would be reached at the current burn rate) is
  // projected from the moment of each answer, so it moves between the two calls.
  const withoutForecast = (u: Record<string, any>) =>
    Object.fromEntries(Object.entries(u).map(([k, { forecast: _f, ...rest }]) => [k, rest]));
  expect(withoutForecast(usage.body.usage)).toEqual(withoutForecast(dry.body.usage));
  expect(usage.body.policies.map((p: any) => [p.name, p.usageKey])).toEqual([
    ['resource-daily-cost', 'resource:acme@24h'],
    ['resource-weekly-tokens', 'resource:acme@7d'],
  ]);
  const ingestOnly = await createProject(service.url, ['ingest']);
  expect(
    (await call(service.url, 'GET', '/v1/guard/usage?scopeKey=resource:acme', { token: ingestOnly.key })).status,
  ).toBe(403);
  expect((await call(service.url, 'GET', '/v1/guard/usage?scopeKey=acme', { token: readKey })).status).toBe(400);
});

test('sign in, switch windows, open a scope and the budgets: the page shows what the routes return', async () => {
  await page.goto(`${service.url}/dashboard`);
  await page.waitForSelector('#view[data-state=sign-in]');
  await page.fill(
    '#key',
    project.key.replace(/.$/, (c) => (c === 'x' ? 'y' : 'x')),
  );
  await page.click('#sign-in-form button[type=submit]');
  await until("document.getElementById('sign-in-error').textContent !== ''");
  expect(await page.locator('#sign-in-error').innerText()).toBe('That key is not valid.');
  // The browser logs the 401 of that attempt; nothing else may fail.
  pageErrors.length = 0;

  await page.fill('#key', readKey);
  await page.click('#sign-in-form button[type=submit]');
  await ready();
  expect(await page.evaluate("sessionStorage.getItem('tollgate.readKey')")).toBe(readKey);
  expect(await page.evaluate('localStorage.length')).toBe(0);

  // Default window (24h), then each other one.
  const day = await expectOverviewMatchesRoutes();
  expect(day.steps.value).toBeGreaterThan(0);
  expect(await page.locator('#chart-cost .uplot').count()).toBe(1);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-overview-24h.png'), fullPage: true });
  for (const w of ['1h', '7d', '365d']) {
    await page.click(`#windows button[data-window="${w}"]`);
    await until(`location.hash.includes('w=${w}')`);
    await ready();
    const { start, end } = await shownRange();
    expect(Date.parse(end) - Date.parse(start)).toBe({ '1h': HOUR, '7d': 7 * 24 * HOUR, '365d': 365 * 24 * HOUR }[w]);
    await expectOverviewMatchesRoutes();
  }
  const year = await expectOverviewMatchesRoutes();
  expect(year.steps.value).toBe(160);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-overview-365d.png'), fullPage: true });

  // A custom range, typed in the viewer's time zone (New York): the last 3 days up to 2 hours ago.
  await page.click('#windows button[data-window="custom"]');
  const local = (ms: number) =>
    new Intl.DateTimeFormat('sv-SE', { timeZone: TIME_ZONE, dateStyle: 'short', timeStyle: 'short' })
      .format(ms)
      .replace(' ', 'T');
  const to = Math.floor((Date.now() - 2 * HOUR) / 60_000) * 60_000;
  const from = to - 3 * 24 * HOUR;
  await page.fill('#custom-start', local(from));
  await page.fill('#custom-end', local(to));
  await page.click('#custom button[type=submit]');
  await until("location.hash.includes('from=')");
  await ready();
  expect(await shownRange()).toEqual({ start: new Date(from).toISOString(), end: new Date(to).toISOString() });
  await expectOverviewMatchesRoutes();

  // The projection lag is shown exactly when the routes report it past 5 s (no worker runs here).
  await page.click('#windows button[data-window="7d"]');
  await until("location.hash.includes('w=7d')");
  await ready();
  const lag = (await metric('aggregate', { name: TOKENS, aggregation: 'sum' })).lag;
  if (lag.ms > 5_000) expect(await page.locator('#lag').isVisible()).toBe(true);

  // Open a scope from the top resources.
  await page.getByTestId('resources-row').first().locator('a').click();
  await until("location.hash.startsWith('#/scope/resource/')");
  await ready();
  const resourceId = await text('scope-id');
  const timestamp = await shownRange();
  const filters = { resourceId, timestamp };
  const totals = await metric('aggregate', {
    name: TOKENS,
    aggregation: 'sum',
    filters,
    comparePeriod: 'previous_period',
  });
  expect(await text('kpi-cost-value')).toBe(moneyText(totals.estimatedCost, 'USD'));
  expect(await text('kpi-tokens-value')).toBe(intText(totals.value));
  expect(await text('kpi-steps-value')).toBe(
    intText((await metric('aggregate', { name: STEPS, aggregation: 'count', filters })).value),
  );

  const guard = (await call(service.url, 'GET', `/v1/guard/usage?scopeKey=resource:${resourceId}`, { token: readKey }))
    .body;
  const budgets = page.getByTestId('budget');
  expect(await budgets.count()).toBe(2);
  const daily = page.locator('[data-testid=budget][data-policy=resource-daily-cost]');
  const dailyUsage = guard.usage[`resource:${resourceId}@24h`];
  expect(await daily.getByTestId('budget-used').innerText()).toBe(
    moneyText(dailyUsage.estimatedCost + dailyUsage.reservedCost, 'USD'),
  );
  expect(await daily.getByTestId('budget-limit').innerText()).toBe(moneyText(dailyCap, 'USD'));
  const weekly = page.locator('[data-testid=budget][data-policy=resource-weekly-tokens]');
  const weeklyUsage = guard.usage[`resource:${resourceId}@7d`];
  expect(await weekly.getByTestId('budget-used').innerText()).toBe(
    intText(weeklyUsage.totalTokens + weeklyUsage.reservedInputTokens + weeklyUsage.reservedOutputTokens),
  );
  // Soft and hard thresholds are drawn: two dashed series besides the usage, named in the legend.
  expect(await daily.locator('.u-legend').innerText()).toMatch(/Soft \(60%\)[\s\S]*Hard limit/);

  const decisions = (
    await call(service.url, 'GET', `/v1/guard/decisions?scopeKey=resource:${resourceId}&limit=20`, { token: readKey })
  ).body.decisions;
  expect(await page.getByTestId('decision').count()).toBe(decisions.length);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-scope.png'), fullPage: true });

  // acme was checked twice: its denials are listed.
  await page.goto(`${service.url}/dashboard#/scope/resource/acme?w=7d`);
  await ready();
  const acme = (
    await call(service.url, 'GET', '/v1/guard/decisions?scopeKey=resource:acme&limit=20', { token: readKey })
  ).body.decisions;
  expect(acme.filter((d: any) => d.decision === 'deny')).toHaveLength(2);
  expect(await page.locator('[data-testid=decision][data-decision=deny]').count()).toBe(2);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-scope-acme.png'), fullPage: true });

  // Budgets: every policy with the usage of the scopes in its window.
  await page.click('.nav a[data-page=budgets]');
  await until("location.hash.startsWith('#/budgets')");
  await ready();
  const cards = page.getByTestId('policy');
  expect(await cards.count()).toBe(2);
  for (let i = 0; i < 2; i++) {
    const card = cards.nth(i);
    const type = await card.getAttribute('data-limit-type');
    const ts = { start: (await card.getAttribute('data-start'))!, end: (await card.getAttribute('data-end'))! };
    const { groups } = await metric('breakdown', {
      name: TOKENS,
      groupBy: ['resourceId'],
      aggregation: 'sum',
      filters: { timestamp: ts },
      limit: 1000,
    });
    const used = (g: any) => (type === 'cost' ? g.estimatedCost : g.value);
    const expected = groups
      .filter((g: any) => g.dimensions.resourceId !== null)
      .sort((a: any, b: any) => used(b) - used(a));
    const rows = card.getByTestId('policy-usage');
    expect(await rows.count()).toBe(Math.min(expected.length, 8));
    for (let r = 0; r < (await rows.count()); r++) {
      expect(await rows.nth(r).getAttribute('data-scope-id')).toBe(expected[r].dimensions.resourceId);
      expect(await rows.nth(r).locator('.used').innerText()).toBe(
        type === 'cost' ? moneyText(used(expected[r]), 'USD') : intText(used(expected[r])),
      );
    }
  }
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-budgets.png'), fullPage: true });

  // A narrow screen: the same page, laid out in one column.
  await page.setViewportSize({ width: 420, height: 900 });
  await page.click('.nav a[data-page=overview]');
  await ready();
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-overview-mobile.png'), fullPage: true });
  await page.setViewportSize({ width: 1360, height: 900 });

  // Signing out forgets the key; a project with no events is told how to send its first one.
  await page.click('#sign-out');
  await page.waitForSelector('#view[data-state=sign-in]');
  expect(await page.evaluate("sessionStorage.getItem('tollgate.readKey')")).toBeNull();
  await page.fill('#key', emptyReadKey);
  await page.click('#sign-in-form button[type=submit]');
  await ready();
  expect(await text('empty-project')).toContain('curl -X POST');
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-empty.png'), fullPage: true });
  await page.click('.nav a[data-page=budgets]');
  await until("location.hash.startsWith('#/budgets')");
  await ready();
  expect(await page.getByTestId('no-policies').isVisible()).toBe(true);
});

test('a step that used more than it reserved is listed on its scope page with the exact numbers; a scope without any says so', async () => {
  // A tokenizer that counts three times the estimate: 1,000 input tokens reserved, 3,000 used.
  const resourceId = `drift-${randomUUID()}`;
  const traceId = `run-drift-${randomUUID()}`;
  const check = await call(service.url, 'POST', '/v1/guard/check', {
    token: project.key,
    body: {
      context: { resourceId, traceId },
      estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 },
      reserve: true,
      stepId: `step-${randomUUID()}`,
      limits: [{ scope: 'resource', window: '24h', maxCost: 100 }],
    },
  });
  expect(check.status).toBe(200);
  expect(check.body.decision).toBe('allow');
  const reservation = check.body.reservation;
  expect(reservation).toMatchObject({ inputTokens: 1000, outputTokens: 200, costUnit: 'USD' });
  expect(reservation.estimatedCost).toBeGreaterThan(0);

  const step = stepEvent({
    resourceId,
    traceId,
    reservationId: reservation.id,
    usage: { inputTokens: 3000, outputTokens: 200 },
  });
  const settle = await call(service.url, 'POST', '/v1/events', { token: project.key, body: { events: [step] } });
  expect(settle.status).toBeLessThan(300);
  const exceeded = settle.body.results[0].reservationExceeded;
  expect(exceeded).toMatchObject({
    reservationId: reservation.id,
    reserved: { inputTokens: 1000, outputTokens: 200 },
    actual: { inputTokens: 3000, outputTokens: 200, costUnit: 'USD' },
  });
  expect(exceeded.actual.cost).toBeGreaterThan(reservation.estimatedCost);

  await signIn(readKey);
  await openScope('resource', resourceId);
  const rows = page.getByTestId('exceeded-step');
  expect(await rows.count()).toBe(1);
  const row = rows.first();
  expect(await row.getAttribute('data-reservation-id')).toBe(reservation.id);
  expect(await row.getAttribute('data-step-event-id')).toBe(step.eventId);
  expect(await row.getByTestId('exceeded-reserved-input').innerText()).toBe('1,000');
  expect(await row.getByTestId('exceeded-actual-input').innerText()).toBe('3,000');
  expect(await row.getByTestId('exceeded-ratio').innerText()).toBe('3.00×');
  expect(await row.getByTestId('exceeded-reserved-output').innerText()).toBe('200');
  expect(await row.getByTestId('exceeded-actual-output').innerText()).toBe('200');
  expect(await row.getByTestId('exceeded-reserved-cost').innerText()).toBe(moneyText(reservation.estimatedCost, 'USD'));
  expect(await row.getByTestId('exceeded-actual-cost').innerText()).toBe(moneyText(exceeded.actual.cost, 'USD'));
  expect(await page.getByTestId('no-exceeded').count()).toBe(0);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-scope-exceeded.png'), fullPage: true });

  // acme has steps and guard decisions, but no settlement that passed its reservation.
  await openScope('resource', 'acme');
  expect(await page.getByTestId('exceeded-step').count()).toBe(0);
  expect(await text('no-exceeded')).toBe(
    'No step of this resource used more than the guard reserved for it. A step appears here when its actual tokens or cost pass its reservation, e.g. when the tokenizer counts more input tokens than the estimate.',
  );
});

test("a budget card shows each unit's cost when the scope's usage is in several units", async () => {
  const resourceId = `two-units-${randomUUID()}`;
  const events = [
    stepEvent({ resourceId, usage: { inputTokens: 1000, outputTokens: 200 } }),
    stepEvent({ resourceId, usage: { inputTokens: 500, outputTokens: 100 }, cost: { amount: 0.5, currency: 'EUR' } }),
  ];
  const ingest = await call(service.url, 'POST', '/v1/events', { token: project.key, body: { events } });
  expect(ingest.body.accepted).toBe(2);
  const usage = (await call(service.url, 'GET', `/v1/guard/usage?scopeKey=resource:${resourceId}`, { token: readKey }))
    .body.usage[`resource:${resourceId}@24h`];
  expect(Object.keys(usage.costByUnit).sort()).toEqual(['EUR', 'USD']);
  expect(usage.costByUnit.EUR).toBe(0.5);

  await signIn(readKey);
  await openScope('resource', resourceId);
  const daily = page.locator('[data-testid=budget][data-policy=resource-daily-cost]');
  const units = daily.getByTestId('budget-used-unit');
  expect(await units.count()).toBe(2);
  const shown = Object.fromEntries(
    await Promise.all(
      [0, 1].map(async (i) => [await units.nth(i).getAttribute('data-unit'), await units.nth(i).innerText()]),
    ),
  );
  expect(shown).toEqual({ EUR: moneyText(0.5, 'EUR'), USD: moneyText(usage.costByUnit.USD, 'USD') });
  // Tokens have no unit: the token budget still shows one figure.
  const weekly = page.locator('[data-testid=budget][data-policy=resource-weekly-tokens]');
  expect(await weekly.getByTestId('budget-used').innerText()).toBe(intText(1800));
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-scope-two-units.png'), fullPage: true });
});

test('a model with no price is marked in the top models with its unpriced tokens, and the cost says what it leaves out', async () => {
  // Its own project, so the top tables hold only these steps: 2 priced gpt-4o steps ($3.00), 2 of a model no catalog knows.
  const own = await createProject(service.url, ['ingest', 'read']);
  const resourceId = `unpriced-${randomUUID()}`;
  const at = new Date(Date.now() - 10 * 60_000).toISOString();
  const acme = { provider: 'acme', model: 'acme-unknown' };
  const events = [
    stepEvent({ resourceId, occurredAt: at, usage: { inputTokens: 400_000, outputTokens: 100_000 } }),
    stepEvent({ resourceId, occurredAt: at, usage: { inputTokens: 200_000, outputTokens: 50_000 } }),
    stepEvent({ resourceId, occurredAt: at, ...acme, usage: { inputTokens: 1_500_000, outputTokens: 100 } }),
    stepEvent({ resourceId, occurredAt: at, ...acme, usage: { inputTokens: 500_000, outputTokens: 10 } }),
  ];
  expect((await call(service.url, 'POST', '/v1/events', { token: own.key, body: { events } })).body.accepted).toBe(4);

  await signIn(own.key);
  expect(await text('kpi-cost-value')).toBe(moneyText(3, 'USD'));
  expect(await text('kpi-tokens-value')).toBe(intText(2_750_110));
  const kpi = page.getByTestId('kpi-cost-unpriced');
  expect([await kpi.getAttribute('data-steps'), await kpi.getAttribute('data-tokens')]).toEqual(['2', '2000110']);
  expect(await kpi.innerText()).toBe('partly unpriced 2,000,110 tokens unpriced');

  const rows = page.getByTestId('models-row');
  expect(await rows.count()).toBe(2);
  const unknown = page.locator('[data-testid=models-row][data-key="acme / acme-unknown"]');
  expect(await unknown.locator('.tokens').innerText()).toBe(intText(2_000_110));
  expect(await unknown.locator('.cost .amount').innerText()).toBe('—');
  expect(await unknown.getByTestId('unpriced-badge').innerText()).toBe('no price');
  expect(await unknown.getByTestId('unpriced-tokens').innerText()).toBe('2,000,110 tokens');
  expect(await unknown.getAttribute('data-unpriced-steps')).toBe('2');
  const priced = page.locator('[data-testid=models-row][data-key="openai / gpt-4o"]');
  expect(await priced.locator('.cost .amount').innerText()).toBe(moneyText(3, 'USD'));
  expect(await priced.getByTestId('unpriced').count()).toBe(0);
  // The resource holds both: its cost is the priced part, and it says the rest is unpriced.
  const resource = page.locator(`[data-testid=resources-row][data-key="${resourceId}"]`);
  expect(await resource.locator('.cost .amount').innerText()).toBe(moneyText(3, 'USD'));
  expect(await resource.getByTestId('unpriced-badge').innerText()).toBe('partly unpriced');
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-unpriced.png'), fullPage: true });

  await openScope('resource', resourceId);
  expect(await text('kpi-cost-value')).toBe(moneyText(3, 'USD'));
  expect(await page.getByTestId('kpi-cost-unpriced-tokens').innerText()).toBe('2,000,110 tokens');
});

const steps = async (qs: string) => {
  const r = await call(service.url, 'GET', `/v1/steps?${qs}`, { token: readKey });
  expect(r.status).toBe(200);
  return r.body;
};

test('the steps page lists the step events newest first with the route’s figures, pages by cursor and filters', async () => {
  await signIn(readKey);
  await page.goto(`${service.url}/dashboard#/steps?w=7d`);
  await ready();
  const { start, end } = await shownRange();
  const range = `from=${encodeURIComponent(start)}&to=${encodeURIComponent(end)}`;
  const first = await steps(`${range}&limit=50`);
  expect(first.steps).toHaveLength(50);
  const rows = page.getByTestId('step');
  expect(await rows.count()).toBe(50);
  for (const i of [0, 1, 17, 49]) {
    const s = first.steps[i];
    const row = rows.nth(i);
    expect(await row.getAttribute('data-event-id')).toBe(s.eventId);
    expect(await row.getByTestId('step-model').innerText()).toContain(`${s.provider} / ${s.model}`);
    expect(await row.getByTestId('step-cost').innerText()).toBe(s.unpriced ? '—' : moneyText(s.cost, s.costUnit));
    expect(await row.getByTestId('step-latency').innerText()).toBe(
      s.durationMs === null ? '—' : `${intText(s.durationMs)} ms`,
    );
    expect((await row.getByTestId('step-input').innerText()).split('\n')[0]).toBe(intText(s.usage.inputTokens));
    expect((await row.getByTestId('step-output').innerText()).split('\n')[0]).toBe(intText(s.usage.outputTokens));
    expect(await row.getByTestId('step-cached').count()).toBe(s.usage.cacheReadTokens ? 1 : 0);
    expect(await row.getByTestId('step-resource').innerText()).toBe(s.scopes.resourceId);
  }
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-steps.png'), fullPage: true });
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-steps-top.png') });
  // The table fits a 1360 px screen: no sideways scrolling.
  expect(await page.locator('[data-testid=steps] .scroll-x').evaluate((d) => d.scrollWidth <= d.clientWidth)).toBe(
    true,
  );

  // Older: the route's next page, then back to the newest.
  await page.getByTestId('next-page').click();
  await until("location.hash.includes('cursor=')");
  await ready();
  const second = await steps(`${range}&limit=50&cursor=${first.nextCursor}`);
  expect(await page.getByTestId('step').count()).toBe(second.steps.length);
  expect(await page.getByTestId('step').first().getAttribute('data-event-id')).toBe(second.steps[0].eventId);

  // Every step of the window once over all pages: as many as the metric routes count.
  let cursor = first.nextCursor;
  let total = first.steps.length;
  while (cursor) {
    const next = await steps(`${range}&limit=50&cursor=${cursor}`);
    total += next.steps.length;
    cursor = next.nextCursor;
  }
  expect(total).toBe(
    (await metric('aggregate', { name: STEPS, aggregation: 'count', filters: { timestamp: { start, end } } })).value,
  );

  // Filter by model and agent with the form.
  await page.getByTestId('first-page').click();
  await ready();
  await page.fill('#step-filters input[name=model]', 'claude-3-5-sonnet-20240620');
  await page.fill('#step-filters input[name=entityName]', 'support-agent');
  await page.click('#step-filters button[type=submit]');
  await until("location.hash.includes('model=claude')");
  await ready();
  const filtered = await steps(`${range}&limit=50&model=claude-3-5-sonnet-20240620&entityName=support-agent`);
  expect(filtered.steps.length).toBeGreaterThan(0);
  expect(await page.getByTestId('step').count()).toBe(filtered.steps.length);
  for (const t of await page.getByTestId('step-model').allInnerTexts())
    expect(t).toContain('anthropic / claude-3-5-sonnet-20240620');
  for (const t of await page.getByTestId('step-agent').allInnerTexts()) expect(t).toBe('support-agent');

  // Environment and tag, by URL; and a filter nothing matches.
  await page.goto(`${service.url}/dashboard#/steps?w=7d&environment=prod&tag=beta&resourceId=acme`);
  await ready();
  const envTag = await steps(`${range}&limit=50&environment=prod&tag=beta&resourceId=acme`);
  expect(await page.getByTestId('step').count()).toBe(envTag.steps.length);
  await page.goto(`${service.url}/dashboard#/steps?w=7d&userId=nobody`);
  await ready();
  expect(await text('no-steps')).toBe('No step matches these filters in the last 7d.');
});

test('a run shows its steps in order with the cumulative cost against the run budget, the reservations, their settlement and the denial', async () => {
  const traceId = `run-page-${randomUUID()}`;
  const resourceId = `run-page-res-${randomUUID()}`;
  const context = { traceId, resourceId, entityName: 'support-agent' };
  const estimate = { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 };
  const limits = [{ scope: 'run', maxCost: 0.02 }];
  const settled: any[] = [];
  for (let i = 0; i < 2; i++) {
    const check = await call(service.url, 'POST', '/v1/guard/check', {
      token: project.key,
      body: { context, estimate, reserve: true, stepId: `step-${i}-${traceId}`, limits },
    });
    expect(check.body.decision).toBe('allow');
    const e = stepEvent({
      ...context,
      reservationId: check.body.reservation.id,
      durationMs: 900 + i,
      usage: { inputTokens: i ? 2500 : 900, outputTokens: 150, cacheReadTokens: 100 },
    });
    expect(
      (await call(service.url, 'POST', '/v1/events', { token: project.key, body: { events: [e] } })).body.accepted,
    ).toBe(1);
    settled.push({ event: e, reservation: check.body.reservation });
  }
  // A third check whose estimate no longer fits the run's request limit: denied, and audited.
  const denied = await call(service.url, 'POST', '/v1/guard/check', {
    token: project.key,
    body: { context, estimate: { ...estimate, inputTokens: 4000 }, limits },
  });
  expect(denied.body.decision).toBe('deny');
  expect(denied.body.violations[0]).toMatchObject({ scope: 'run', scopeKey: `run:${traceId}`, source: 'request' });

  const run = (await call(service.url, 'GET', `/v1/runs/${traceId}`, { token: readKey })).body;
  expect(run.steps.map((s: any) => s.eventId)).toEqual(settled.map((s) => s.event.eventId));
  expect(run.guard.map((g: any) => g.kind)).toEqual(['reservation', 'reservation', 'decision']);

  await signIn(readKey);
  // From the steps list, the run id links to the run page.
  await page.goto(`${service.url}/dashboard#/steps?w=24h&traceId=${traceId}`);
  await ready();
  await page.getByTestId('step-run').first().click();
  await until("location.hash.startsWith('#/run/')");
  await ready();
  expect(await text('run-id')).toBe(traceId);
  expect(await text('run-steps-value')).toBe('2');
  const total = run.steps[0].cost + run.steps[1].cost;
  expect(await text('run-cost-value')).toBe(moneyText(total, 'USD'));
  expect(await text('run-budget-value')).toBe(moneyText(0.02, 'USD'));
  expect(await text('run-budget-percent')).toBe(
    `${new Intl.NumberFormat(LOCALE, { style: 'percent', maximumFractionDigits: 1 }).format(total / 0.02)} used`,
  );

  // The timeline: reservation, its step, reservation, its step, the denial.
  const kinds = await page
    .locator('[data-testid=timeline] tbody tr')
    .evaluateAll((trs) => trs.map((tr) => (tr as any).dataset.testid + ':' + ((tr as any).dataset.kind ?? '')));
  expect(kinds).toEqual([
    'run-guard:reservation',
    'run-step:',
    'run-guard:reservation',
    'run-step:',
    'run-guard:decision',
  ]);
  const stepRows = page.getByTestId('run-step');
  expect(await stepRows.nth(0).getByTestId('run-cumulative').innerText()).toBe(moneyText(run.steps[0].cost, 'USD'));
  expect(await stepRows.nth(1).getByTestId('run-cumulative').innerText()).toBe(moneyText(total, 'USD'));
  for (let i = 0; i < 2; i++) {
    const r = stepRows.nth(i).getByTestId('step-reservation');
    expect(await r.getAttribute('data-reservation-id')).toBe(settled[i].reservation.id);
    expect(await r.getByTestId('step-reserved').innerText()).toBe(
      `${moneyText(settled[i].reservation.estimatedCost, 'USD')} · ${intText(settled[i].reservation.inputTokens)} in / 200 out`,
    );
    expect(await r.getByTestId('step-settlement').innerText()).toBe('settled by this step');
  }
  // The second step used 2,500 input tokens against the reservation's estimate.
  expect(await stepRows.nth(1).getByTestId('step-exceeded').count()).toBe(run.steps[1].reservation.exceeded ? 1 : 0);
  expect(run.steps[1].reservation.exceeded).toBe(true);
  const denial = page.locator('[data-testid=run-guard][data-kind=decision]');
  expect(await denial.locator(`[data-testid=finding][data-scope-key="run:${traceId}"]`).innerText()).toContain(
    `run ${traceId} · request limit: cost`,
  );
  expect(Number(await page.locator('#chart-run').getAttribute('data-points'))).toBe(2);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-run.png'), fullPage: true });

  // On the resource's page, that denial names the run whose request limit caused it, with a link.
  await openScope('resource', resourceId);
  const finding = page.locator(`[data-testid=decision] [data-testid=finding][data-scope-key="run:${traceId}"]`);
  expect(await finding.count()).toBe(1);
  expect(await finding.getByTestId('finding-scope').innerText()).toBe(`run ${traceId}`);
  expect(await finding.locator('a[data-testid=finding-scope]').getAttribute('href')).toContain(
    `#/scope/run/${encodeURIComponent(traceId)}`,
  );
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-scope-denied-by-run.png'), fullPage: true });

  // An unknown run and an unknown scope id say "no data", not zeros.
  await page.goto(`${service.url}/dashboard#/run/no-such-run`);
  await ready();
  expect(await page.getByTestId('no-data').isVisible()).toBe(true);
  await openScope('resource', 'no-such-customer');
  expect(await page.getByTestId('no-data').innerText()).toContain('No data for this resource');
  expect(await page.getByTestId('kpi-cost').count()).toBe(0);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-scope-unknown.png'), fullPage: true });
});

test('latency: p50/p95 per model over the window, as the route and the metric percentiles give them', async () => {
  await signIn(readKey);
  await page.goto(`${service.url}/dashboard#/latency?w=7d`);
  await ready();
  const { start, end } = await shownRange();
  const { models } = (
    await call(
      service.url,
      'GET',
      `/v1/steps/latency?from=${encodeURIComponent(start)}&to=${encodeURIComponent(end)}&limit=50`,
      { token: readKey },
    )
  ).body;
  expect(models.length).toBeGreaterThanOrEqual(4);
  const rows = page.getByTestId('latency-row');
  expect(await rows.count()).toBe(models.length);
  for (let i = 0; i < models.length; i++) {
    expect(await rows.nth(i).getAttribute('data-key')).toBe(`${models[i].provider} / ${models[i].model}`);
    expect(await rows.nth(i).getByTestId('latency-p50').innerText()).toBe(`${intText(models[i].p50)} ms`);
    expect(await rows.nth(i).getByTestId('latency-p95').innerText()).toBe(`${intText(models[i].p95)} ms`);
    expect(await rows.nth(i).getByTestId('latency-steps').innerText()).toBe(intText(models[i].steps));
  }
  expect(await page.locator('[data-testid=latency-chart] .uplot').count()).toBe(4);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-latency.png'), fullPage: true });

  // Over a range inside one UTC day, the metric route's 1d percentile is the same figure.
  // (The last 50 minutes hold four gpt-4o steps; the range starts no earlier than this UTC day.)
  const now = Date.now();
  const ts = {
    start: new Date(Math.max(Math.floor(now / (24 * HOUR)) * 24 * HOUR, now - 50 * 60_000)).toISOString(),
    end: new Date(now).toISOString(),
  };
  const m = MODELS[0];
  const answer = await call(service.url, 'GET', `/v1/steps/latency?from=${ts.start}&to=${ts.end}&model=${m.model}`, {
    token: readKey,
  });
  expect(answer.body.models).toHaveLength(1);
  const route = answer.body.models[0];
  const perc = await metric('percentiles', {
    name: 'mastra_model_duration_ms',
    percentiles: [0.5, 0.95],
    interval: '1d',
    filters: { timestamp: ts, model: m.model },
  });
  expect(perc.series.map((s: any) => s.points.map((p: any) => p.value))).toEqual([[route.p50], [route.p95]]);
});

test('fixes: full model names, tables sorted by cost and sortable, one money format, 7d in 6 h buckets, "Sign out" on one line, onboarding code inside its box, unpriced steps marked', async () => {
  await signIn(readKey);
  await page.goto(`${service.url}/dashboard#/overview?w=7d`);
  await ready();
  const { start, end } = await shownRange();
  // Both Claude models, named in full and not cut.
  for (const model of ['claude-3-5-sonnet-20241022', 'claude-3-5-sonnet-20240620']) {
    const cell = page.locator(`[data-testid=models-row][data-key="anthropic / ${model}"] td.name`);
    expect(await cell.innerText()).toBe(`anthropic / ${model}`);
    expect(await cell.evaluate((td) => td.scrollWidth <= td.clientWidth)).toBe(true);
  }
  // By cost by default; a click on Tokens sorts by tokens, a second click reverses.
  expect(await page.getByTestId('resources').getAttribute('data-sort')).toBe('cost');
  const costs = await page
    .getByTestId('resources-row')
    .evaluateAll((trs) => trs.map((tr) => Number((tr as any).dataset.cost)));
  expect(costs).toEqual([...costs].sort((a, b) => b - a));
  await page.locator('[data-testid=resources] button[data-sort=tokens]').click();
  const tokens = await page
    .getByTestId('resources-row')
    .evaluateAll((trs) => trs.map((tr) => Number((tr as any).dataset.tokens)));
  expect(tokens).toEqual([...tokens].sort((a, b) => b - a));
  await page.locator('[data-testid=resources] button[data-sort=tokens]').click();
  const ascending = await page
    .getByTestId('resources-row')
    .evaluateAll((trs) => trs.map((tr) => Number((tr as any).dataset.tokens)));
  expect(ascending).toEqual([...ascending].sort((a, b) => a - b));
  // 7 days: 28 six-hour buckets, whose sum is the window's tokens.
  const chart = page.locator('#chart-tokens');
  expect(await chart.getAttribute('data-points')).toMatch(/^(28|29)$/);
  const totals = await metric('aggregate', {
    name: TOKENS,
    aggregation: 'sum',
    filters: { timestamp: { start, end } },
  });
  expect(JSON.parse((await chart.getAttribute('data-sums'))!)[0]).toBe(totals.value);
  // One money format: $0.50 and $1.00, not $0.5000 beside $1.00.
  expect(
    await page.evaluate(
      "import('/dashboard/assets/format.js').then((f) => [f.money(0.5, 'USD'), f.money(1, 'USD'), f.money(0.0045, 'USD'), f.money(12.34567, 'USD')])",
    ),
  ).toEqual(['$0.50', '$1.00', '$0.0045', '$12.3457']);

  // 1400 px wide, with the custom range open: "Sign out" on the top bar's one line.
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.click('#windows button[data-window="custom"]');
  const box = async (sel: string) => (await page.locator(sel).boundingBox())!;
  const signOut = await box('#sign-out');
  const brand = await box('.brand');
  expect(Math.abs(signOut.y + signOut.height / 2 - (brand.y + brand.height / 2))).toBeLessThan(12);
  expect(signOut.height).toBeLessThan(40);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-topbar-1400.png') });
  await page.setViewportSize({ width: 1360, height: 900 });

  // Unpriced steps are marked in the steps list.
  const own = await createProject(service.url, ['ingest', 'read']);
  await call(service.url, 'POST', '/v1/events', {
    token: own.key,
    body: {
      events: [
        stepEvent({ provider: 'acme', model: 'acme-unknown', usage: { inputTokens: 700, outputTokens: 30 } }),
        stepEvent(),
      ],
    },
  });
  await signIn(own.key);
  await page.goto(`${service.url}/dashboard#/steps?w=1h`);
  await ready();
  const unpricedRow = page.locator('[data-testid=step]', { has: page.locator('[data-testid=step-unpriced]') });
  expect(await unpricedRow.count()).toBe(1);
  expect((await unpricedRow.getByTestId('step-unpriced').innerText()).replace(/\s+/g, ' ')).toBe(
    'no price 730 tokens unpriced',
  );
  await page.goto(`${service.url}/dashboard#/steps?w=1h&unpriced=true`);
  await ready();
  expect(await page.getByTestId('step').count()).toBe(1);

  // The onboarding snippets stay inside their box, on a phone and on a desktop.
  await signIn(emptyReadKey);
  for (const width of [420, 1360]) {
    await page.setViewportSize({ width, height: 900 });
    await page.goto(`${service.url}/dashboard#/overview`);
    await ready();
    const overflow = await page
      .locator('[data-testid=empty-project] pre')
      .evaluateAll((pres) => pres.map((p) => p.scrollWidth - p.clientWidth));
    expect(overflow).toEqual([0, 0]);
    expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, `dashboard-empty-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1360, height: 900 });
});
