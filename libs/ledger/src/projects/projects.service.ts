import { Injectable } from '@nestjs/common';
import { CACHE_CHANNELS, notifySql, Prisma, PrismaService } from '@tollgate/database';
import { AppError, Caches, Config, issueKey, type KeyScope } from '@tollgate/platform';
import { randomBytes } from 'node:crypto';
import { ProjectSettingsReader } from '../project-settings/project-settings.reader';
import type { ProjectSettingsInput } from './projects.schemas';

type ProjectRow = {
  id: string;
  name: string;
  unpricedPolicy: string;
  unpricedFallback: unknown;
  costUnit: string;
  exchangeRates: unknown;
  maxEventAgeDays: number | null;
  createdAt: Date;
};

const projectView = (p: ProjectRow) => ({
  id: p.id,
  name: p.name,
  unpricedPolicy: p.unpricedPolicy,
  unpricedFallback: (p.unpricedFallback ?? null) as {
    inputPerMillion: number;
    outputPerMillion: number;
    currency?: string;
  } | null,
  costUnit: p.costUnit,
  exchangeRates: (p.exchangeRates ?? {}) as Record<string, number>,
  maxEventAgeDays: p.maxEventAgeDays,
  createdAt: p.createdAt.toISOString(),
});

/** Projects and their API keys. Keys are returned whole once, at creation, and stored as a hash. */
@Injectable()
export class ProjectsService {
  constructor(
    private readonly prisma: PrismaService,
    private readonly caches: Caches,
    private readonly config: Config,
    private readonly settings: ProjectSettingsReader,
  ) {}

  async createProject(input: { name: string; unpricedPolicy: ProjectSettingsInput['unpricedPolicy']; id?: string }) {
    const id = input.id ?? `prj_${randomBytes(8).toString('hex')}`;
    if (input.unpricedPolicy === 'fallback')
      throw AppError.validation(
        'unpricedPolicy',
        'fallback needs unpricedFallback: create the project, then set both with PATCH',
      );
    try {
      const p = await this.prisma.project.create({
        data: { id, name: input.name, unpricedPolicy: input.unpricedPolicy },
      });
      return projectView(p);
    } catch (err) {
      if ((err as { code?: string }).code === 'P2002')
        throw new AppError('conflict', `Project ${id} already exists`, 'id');
      throw err;
    }
  }

  /** Changes a project's money settings; every API process forgets its cached copy in the same commit. */
  async updateSettings(projectId: string, input: ProjectSettingsInput) {
    const current = await this.prisma.project.findUnique({ where: { id: projectId } });
    if (!current) throw new AppError('not_found', `No project ${projectId}`, 'projectId');
    const policy = input.unpricedPolicy ?? current.unpricedPolicy;
    const fallback = input.unpricedFallback === undefined ? current.unpricedFallback : input.unpricedFallback;
    if (policy === 'fallback' && !fallback)
      throw AppError.validation('unpricedFallback', 'is required when unpricedPolicy is fallback');
    const operatorMax = this.config.values.INGEST_MAX_AGE_DAYS;
    if (input.maxEventAgeDays && input.maxEventAgeDays > operatorMax)
      throw AppError.validation(
        'maxEventAgeDays',
        `must be at most ${operatorMax} (the operator's INGEST_MAX_AGE_DAYS)`,
      );
    const data = {
      unpricedPolicy: policy,
      unpricedFallback: fallback === null ? Prisma.DbNull : (fallback as Prisma.InputJsonValue),
      ...(input.costUnit ? { costUnit: input.costUnit } : {}),
      ...(input.exchangeRates ? { exchangeRates: input.exchangeRates } : {}),
      ...(input.maxEventAgeDays !== undefined ? { maxEventAgeDays: input.maxEventAgeDays } : {}),
    };
    const [p] = await this.prisma.$transaction([
      this.prisma.project.update({ where: { id: projectId }, data }),
      this.prisma.$executeRawUnsafe(notifySql(CACHE_CHANNELS.projects), projectId),
    ]);
    this.settings.evict(projectId);
    return projectView(p);
  }

  async createKey(projectId: string, input: { scopes: KeyScope[]; name?: string }) {
    const project = await this.prisma.project.findUnique({ where: { id: projectId } });
    if (!project) throw new AppError('not_found', `No project ${projectId}`, 'projectId');
    const issued = issueKey();
    const row = await this.prisma.apiKey.create({
      data: { id: issued.id, projectId, name: input.name, secretHash: issued.secretHash, scopes: input.scopes },
    });
    return {
      id: row.id,
      projectId,
      key: issued.key,
      scopes: row.scopes,
      name: row.name,
      createdAt: row.createdAt.toISOString(),
    };
  }

  async revokeKey(projectId: string, keyId: string) {
    // Every API process caches keys: the revocation is announced in its own transaction.
    const [{ count }] = await this.prisma.$transaction([
      this.prisma.apiKey.updateMany({
        where: { id: keyId, projectId, revokedAt: null },
        data: { revokedAt: new Date() },
      }),
      this.prisma.$executeRawUnsafe(notifySql(CACHE_CHANNELS.keys), keyId),
    ]);
    this.caches.keys.evict(keyId);
    if (count === 0) {
      const exists = await this.prisma.apiKey.findFirst({ where: { id: keyId, projectId } });
      if (!exists) throw new AppError('not_found', `No key ${keyId} in project ${projectId}`, 'keyId');
    }
    return { id: keyId, revoked: true };
  }

  async listKeys(projectId: string) {
    const rows = await this.prisma.apiKey.findMany({ where: { projectId }, orderBy: { createdAt: 'asc' } });
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      scopes: r.scopes,
      createdAt: r.createdAt.toISOString(),
      revokedAt: r.revokedAt?.toISOString() ?? null,
    }));
  }
}
