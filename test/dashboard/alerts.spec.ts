import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

/** The dashboard's alerts list and the alert marks of a scope's budgets, in headless Chromium. */
jest.setTimeout(120_000);

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let service: RunningService;
let project: TestProject;
let context: BrowserContext;
let page: Page;
let userDataDir: string;
const pageErrors: string[] = [];
const resourceId = `r-${randomUUID()}`;

async function until(expression: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${expression}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
const ready = () =>
  until(
    "document.getElementById('view').dataset.state === 'ready' && document.getElementById('view').dataset.hash === location.hash",
  );

beforeAll(async () => {
  service = await startService();
  project = await createProject(service.url);
  const api = (method: string, path: string, body?: unknown) =>
    call(service.url, method, path, { token: project.key, body });
  expect(
    (
      await api('PUT', '/v1/policies/daily', {
        scope: 'resource',
        window: '24h',
        maxTotalTokens: 10_000,
        alerts: [50, 80],
      })
    ).status,
  ).toBe(200);
  const at = (msAgo: number, inputTokens: number) =>
    stepEvent({
      resourceId,
      occurredAt: new Date(Date.now() - msAgo).toISOString(),
      usage: { inputTokens, outputTokens: 0 },
    });
  expect((await api('POST', '/v1/events', { events: [at(3 * 3600_000, 3000)] })).body.accepted).toBe(1);
  expect((await api('POST', '/v1/events', { events: [at(20 * 60_000, 3000)] })).body.accepted).toBe(1); // 6000: 50%
  expect((await api('POST', '/v1/events', { events: [at(60_000, 2500)] })).body.accepted).toBe(1); // 8500: 80%

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
    locale: 'en-US',
    timezoneId: 'UTC',
    viewport: { width: 1360, height: 900 },
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (err) => pageErrors.push(err.message));
  page.on('console', (msg) => {
    if (msg.type() === 'error') pageErrors.push(msg.text());
  });
  await page.goto(`${service.url}/dashboard`);
  await page.waitForSelector('#view[data-state=sign-in]');
  await page.fill('#key', project.key);
  await page.click('#sign-in-form button[type=submit]');
  await ready();
});

afterAll(async () => {
  await context?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  await service?.close();
});

test('the alerts page lists the alerts newest first, with usage against the limit', async () => {
  await page.goto(`${service.url}/dashboard#/alerts`);
  await ready();
  const rows = page.getByTestId('alert');
  expect(
    await rows.evaluateAll((els) => els.map((e) => [e.getAttribute('data-kind'), e.getAttribute('data-threshold')])),
  ).toEqual([
    ['BudgetThresholdCrossed', '80'],
    ['BudgetThresholdCrossed', '50'],
  ]);
  expect(await page.getByTestId('alert-figures').allInnerTexts()).toEqual([
    '8,500 of 10,000 tokens',
    '6,000 of 10,000 tokens',
  ]);
  expect(pageErrors).toEqual([]);
});

test("the scope page lists the scope's alerts, marks them on the budget's chart and shows the forecast", async () => {
  await page.goto(`${service.url}/dashboard#/scope/resource/${encodeURIComponent(resourceId)}?w=24h`);
  await ready();
  expect(await page.getByTestId('scope-alerts').getByTestId('alert').count()).toBe(2);
  // The budget's chart has the usage line and the alert marks, each at the usage of its bucket:
  // both alerts were committed in the last bucket, where usage stands at 8500.
  const sums = JSON.parse((await page.locator('#chart-budget-0').getAttribute('data-sums'))!);
  expect(sums).toHaveLength(2);
  expect(sums[1]).toBe(8500);
  // 5500 tokens in the last hour: 1500 left at 5500 / h.
  const forecast = page.getByTestId('budget-forecast');
  expect(await forecast.innerText()).toMatch(/^burn 5,500\/h over the last hour · limit reached /);
  expect(Date.parse((await forecast.getAttribute('data-reached-at'))!)).toBeGreaterThan(Date.now());
  expect(pageErrors).toEqual([]);
});
