import { Injectable } from '@nestjs/common';
import { LOG_START, PrismaService } from '@tollgate/database';
import { AppError, Config } from '@tollgate/platform';
import { randomBytes } from 'node:crypto';
import { ExportJobs } from '../delivery/export-jobs';
import {
  exporterLags,
  listBatches,
  logHead,
  resumeExporter,
  reviveDeadLetters,
  rewindCheckpoint,
  type BatchRow,
} from '../delivery/export-state.sql';
import { Destinations } from '../destination/destinations';
import { recordOf, type ExporterRecord } from '../exporter/exporter-record';
import { DEFAULT_TIMEOUT_MS, destinationField, splitSecrets, type PutExporter } from '../exporter/exporter-settings';
import { SecretBox } from '../exporter/secret-box';
import { tracesUrl } from '../wire/otlp';

/** Exporter configuration and operations, as the API offers them. */
@Injectable()
export class ExportersService {
  private readonly box: SecretBox | null;
  private readonly maxTimeoutMs: number;

  constructor(
    private readonly prisma: PrismaService,
    private readonly jobs: ExportJobs,
    private readonly destinations: Destinations,
    config: Config,
  ) {
    const key = config.values.TOLLGATE_SECRET_KEY;
    this.box = key ? new SecretBox(key) : null;
    this.maxTimeoutMs = config.values.EXPORTS_MAX_TIMEOUT_MS;
  }

  async put(projectId: string, name: string, body: PutExporter) {
    const timeoutMs = body.timeoutMs ?? Math.min(DEFAULT_TIMEOUT_MS, this.maxTimeoutMs);
    if (timeoutMs > this.maxTimeoutMs)
      throw AppError.validation(
        'timeoutMs',
        `must be at most ${this.maxTimeoutMs} (the operator's EXPORTS_MAX_TIMEOUT_MS)`,
      );
    const field = destinationField(body);
    const refusal = await this.destinations.refusal(body.type === 'otlp' ? tracesUrl(body.endpoint) : body.url);
    if (refusal) throw AppError.validation(field, refusal);
    const { settings, secrets } = splitSecrets(body, timeoutMs);
    if (secrets && !this.box) {
      throw new AppError(
        'not_configured',
        'This exporter has secrets (a signing secret or headers), which are stored encrypted: the server needs TOLLGATE_SECRET_KEY (32+ characters) set to accept it',
      );
    }
    const existing = await this.prisma.exporter.findUnique({ where: { projectId_name: { projectId, name } } });
    const id = existing?.id ?? `exp_${randomBytes(8).toString('hex')}`;
    const sealed = secrets ? this.box!.seal(secrets, id) : null;
    const data = { type: body.type, settings: settings as object, secrets: sealed, updatedAt: new Date() };
    if (existing) {
      await this.prisma.exporter.update({ where: { id }, data });
    } else {
      const start = body.startFrom === 'beginning' ? LOG_START : await logHead(this.prisma, projectId);
      try {
        await this.prisma.exporter.create({
          data: { id, projectId, name, ...data, checkpointTx: start.tx, checkpointPosition: start.position },
        });
      } catch (err) {
        if ((err as { code?: string }).code === 'P2002')
          throw new AppError(
            'conflict',
            `Exporter ${name} was created by another request at the same time; retry`,
            'name',
          );
        throw err;
      }
    }
    await this.jobs.drain(id);
    return { ...(await this.get(projectId, name)), created: !existing };
  }

  async list(projectId: string) {
    const rows = await this.prisma.exporter.findMany({ where: { projectId }, orderBy: { name: 'asc' } });
    const lags = new Map(
      (await Promise.all(rows.map((r) => exporterLags(this.prisma, r.id)))).flat().map((l) => [l.exporterId, l]),
    );
    return { exporters: rows.map((r) => this.view(recordOf(r), lags.get(r.id))) };
  }

  async get(projectId: string, name: string) {
    const exporter = await this.find(projectId, name);
    const [lag] = await exporterLags(this.prisma, exporter.id);
    return this.view(exporter, lag);
  }

  async delete(projectId: string, name: string): Promise<void> {
    const exporter = await this.find(projectId, name);
    // Batches go with it (ON DELETE CASCADE); their jobs find nothing and end.
    await this.prisma.exporter.delete({ where: { id: exporter.id } });
  }

  async replay(projectId: string, name: string, from: { position: bigint } | { time: Date }) {
    const exporter = await this.find(projectId, name);
    const moved = await rewindCheckpoint(this.prisma, exporter.id, projectId, from);
    await this.jobs.drain(exporter.id);
    const view = await this.get(projectId, name);
    return { ...view, replay: { rewound: moved !== null } };
  }

  async pause(projectId: string, name: string) {
    const exporter = await this.find(projectId, name);
    await this.prisma.exporter.update({
      where: { id: exporter.id },
      data: { status: 'paused', pausedReason: 'paused through the API', updatedAt: new Date() },
    });
    return this.get(projectId, name);
  }

  async resume(projectId: string, name: string) {
    const exporter = await this.find(projectId, name);
    await resumeExporter(this.prisma, exporter.id);
    await this.jobs.drain(exporter.id);
    return this.get(projectId, name);
  }

  async deadLetters(projectId: string, name: string) {
    const exporter = await this.find(projectId, name);
    const rows = await listBatches(this.prisma, exporter.id, ['dead', 'retrying']);
    return { deadLetters: rows.map(batchView) };
  }

  /** Sends dead-lettered batches again (all of them, or one); they leave the set once delivered. */
  async retryDeadLetters(projectId: string, name: string, batchId?: string) {
    const exporter = await this.find(projectId, name);
    const revived = await reviveDeadLetters(this.prisma, exporter.id, batchId);
    if (batchId && revived.length === 0)
      throw new AppError('not_found', `No dead-lettered batch ${batchId} in exporter ${name}`, 'batchId');
    for (const batch of revived) {
      const jobId = `${batch.id}-r${Date.now().toString(36)}`;
      await this.prisma.exportBatch.update({ where: { id: batch.id }, data: { jobId } });
      await this.jobs.deliver(batch.id, jobId, exporter);
    }
    return { retrying: revived.map((b) => b.id) };
  }

  private async find(projectId: string, name: string): Promise<ExporterRecord> {
    const row = await this.prisma.exporter.findUnique({ where: { projectId_name: { projectId, name } } });
    if (!row) throw new AppError('not_found', `No exporter named ${name} in this project`, 'name');
    return recordOf(row);
  }

  private view(
    e: ExporterRecord,
    lag?: { lagEvents: number; lagSeconds: number; deadBatches: number; deadEvents: number },
  ) {
    const secretNames = this.secretNames(e);
    return {
      name: e.name,
      type: e.type,
      settings: e.settings,
      /** Which secrets are set; their values are never returned. */
      secrets: secretNames,
      status: e.status,
      pausedReason: e.pausedReason,
      consecutiveFailures: e.consecutiveFailures,
      checkpoint: { tx: e.checkpoint.tx, position: e.checkpoint.position.toString() },
      inFlightBatch: e.inFlightBatch,
      lag: lag ? { events: lag.lagEvents, seconds: Math.round(lag.lagSeconds * 1000) / 1000 } : null,
      deadLetters: lag ? { batches: lag.deadBatches, events: lag.deadEvents } : null,
      lastDeliveredAt: e.lastDeliveredAt?.toISOString() ?? null,
      createdAt: e.createdAt.toISOString(),
      updatedAt: e.updatedAt.toISOString(),
    };
  }

  private secretNames(
    e: ExporterRecord,
  ): { signingSecret: boolean; headers: string[]; url?: true } | { sealed: true } | null {
    if (!e.sealedSecrets) return null;
    if (!this.box) return { sealed: true };
    try {
      const s = this.box.open<{ signingSecret?: string; headers?: Record<string, string>; url?: string }>(
        e.sealedSecrets,
        e.id,
      );
      return {
        signingSecret: Boolean(s.signingSecret),
        headers: Object.keys(s.headers ?? {}),
        ...(s.url ? { url: true as const } : {}),
      };
    } catch {
      return { sealed: true };
    }
  }
}

function batchView(b: BatchRow) {
  return {
    id: b.id,
    status: b.status,
    events: b.eventCount,
    from: { tx: b.from.tx, position: b.from.position.toString() },
    to: { tx: b.to.tx, position: b.to.position.toString() },
    attempts: b.attempts,
    lastError: b.lastError,
    createdAt: b.createdAt.toISOString(),
    failedAt: b.failedAt?.toISOString() ?? null,
  };
}
