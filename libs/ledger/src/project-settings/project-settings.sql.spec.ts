import { PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { readProjectSettings } from './project-settings.sql';

/** What a guard check reads of its project, in one round trip, against real PostgreSQL. */
describe('readProjectSettings (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  afterAll(() => prisma.onModuleDestroy());
  const project = async (columns: Record<string, unknown> = {}) => {
    const id = `p-${randomUUID()}`;
    const names = Object.keys(columns);
    await prisma.sql.query(
      `INSERT INTO projects (id, name${names.map((n) => `, ${n}`).join('')}) VALUES ($1, 'settings spec'${names.map((_, i) => `, $${i + 2}`).join('')})`,
      id,
      ...Object.values(columns),
    );
    return id;
  };

  it('reads nothing for an unknown project', async () => {
    expect(await readProjectSettings(prisma.sql, `p-${randomUUID()}`)).toBeNull();
  });

  it('reads a new project with the defaults: unpriced usage denied, USD, no policies, prices or alerts', async () => {
    const settings = await readProjectSettings(prisma.sql, await project());
    expect(settings).toEqual({
      unpricedPolicy: 'deny',
      fallback: null,
      money: { base: 'USD', rates: {} },
      maxEventAgeDays: null,
      policies: [],
      overrides: [],
      alertStates: false,
      requestAlertScopes: [],
    });
  });

  it('reads the unit, the exchange rates, the fallback rate (in the project unit unless it says) and the event age', async () => {
    const id = await project({
      unpriced_policy: 'fallback',
      cost_unit: 'EUR',
      exchange_rates: JSON.stringify({ USD: 0.9 }),
      unpriced_fallback: JSON.stringify({ inputPerMillion: 1, outputPerMillion: 4 }),
      max_event_age_days: 7,
    });
    expect(await readProjectSettings(prisma.sql, id)).toMatchObject({
      unpricedPolicy: 'fallback',
      fallback: { inputPerMillion: 1, outputPerMillion: 4, currency: 'EUR' },
      money: { base: 'EUR', rates: { USD: 0.9 } },
      maxEventAgeDays: 7,
    });
  });

  it('reads its policies and its price overrides, rates as numbers and times as dates', async () => {
    const id = await project();
    await prisma.sql.query(
      `INSERT INTO policies (project_id, name, scope, "window", max_cost_micros, max_total_tokens, warn_at_percent, strategy, entity_name, cost_unit)
       VALUES ($1, 'daily-user', 'user', '24h', 5000000, NULL, 80, 'block', NULL, 'USD'), ($1, 'agent-tokens', 'resource', '1h', NULL, 100000, NULL, 'warn', 'planner', NULL)`,
      id,
    );
    const from = new Date('2026-01-01T00:00:00.000Z');
    await prisma.sql.query(
      `INSERT INTO price_overrides (id, project_id, provider, model, effective_from, currency, input_per_million, output_per_million, cache_read_per_million)
       VALUES ($1, $2, 'acme', 'acme-large', $3, 'USD', 1.25, 5.5, 0.125)`,
      `prc_${randomUUID().slice(0, 8)}`,
      id,
      from,
    );
    const settings = (await readProjectSettings(prisma.sql, id))!;
    expect([...settings.policies].sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      expect.objectContaining({
        name: 'agent-tokens',
        scope: 'resource',
        window: '1h',
        max_cost_micros: null,
        max_total_tokens: 100000,
        strategy: 'warn',
        entity_name: 'planner',
        cost_unit: null,
      }),
      expect.objectContaining({
        name: 'daily-user',
        scope: 'user',
        window: '24h',
        max_cost_micros: 5000000,
        warn_at_percent: 80,
        strategy: 'block',
        entity_name: null,
        cost_unit: 'USD',
      }),
    ]);
    expect(settings.overrides).toEqual([
      {
        id: expect.stringMatching(/^prc_/),
        provider: 'acme',
        model: 'acme-large',
        effectiveFrom: from,
        currency: 'USD',
        inputPerMillion: 1.25,
        outputPerMillion: 5.5,
        cacheReadPerMillion: 0.125,
        cacheWritePerMillion: null,
        cacheWrite1hPerMillion: null,
      },
    ]);
  });
});
