import { PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { readEstimateRatios } from './estimate-ratios.sql';

describe('readEstimateRatios (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  afterAll(() => prisma.onModuleDestroy());

  it('reads one model’s histogram of one project', async () => {
    const project = `p-${randomUUID()}`;
    await prisma.sql.query(
      `INSERT INTO estimate_ratio_bins (project_id, provider, model, bin, n) VALUES ($1, 'anthropic', 'claude', 16, 7), ($1, 'anthropic', 'claude', 17, 2), ($1, 'openai', 'gpt-4o', 10, 5)`,
      project,
    );
    expect(await readEstimateRatios(prisma.sql, project, 'anthropic', 'claude')).toEqual(
      new Map([
        [16, 7],
        [17, 2],
      ]),
    );
    expect(await readEstimateRatios(prisma.sql, `other-${project}`, 'anthropic', 'claude')).toEqual(new Map());
  });
});
