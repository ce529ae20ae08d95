import { Injectable, Logger } from '@nestjs/common';
import { checkpointAfter, PrismaService, readEventsAfter } from '@tollgate/database';
import { exporterBatches, exporterBatchLatency, exporterEvents } from '@tollgate/observability';
import { Config } from '@tollgate/platform';
import { UnrecoverableError } from 'bullmq';
import { randomBytes } from 'node:crypto';
import { recordOf, typesOf, type ExporterRecord } from '../config/exporter-record';
import type { ExporterSecrets } from '../config/exporter-settings';
import { SecretBox, SecretKeyError } from '../config/secret-box';
import { toOtlpTraces, tracesUrl } from '../wire/otlp';
import { webhookRequest } from '../wire/webhook';
import { toWireEvent, type WireEvent } from '../wire/wire-event';
import { cutBatch, matchesTypes } from './batching';
import { ExportJobs } from './export-jobs';
import { claimBatch, completeBatch, deadLetterBatch, findBatch, listBatches, pauseExporter, readRange, recordAttempt, setBatchJob, skipRange, type BatchRow } from './export-state.sql';
import { postToSink, SinkError } from './sink-error';

/** What BullMQ tells the delivery about the attempt. */
export interface DeliveryAttempt {
  batchId: string;
  exporterId: string;
  /** Attempts already made before this one. */
  attemptsMade: number;
  maxAttempts: number;
}

const newId = (prefix: string) => `${prefix}_${randomBytes(10).toString('hex')}`;

/**
 * An exporter's stream: cut the next batch after the checkpoint (drain), deliver it (deliver),
 * and move the checkpoint only once the sink acknowledged it or it was dead-lettered. The log
 * is the buffer: a slow sink leaves events waiting in PostgreSQL, never in this process, and
 * ingest never waits for an exporter.
 */
@Injectable()
export class ExportPipeline {
  private readonly logger = new Logger('exporters');
  private readonly box: SecretBox | null;

  constructor(
    private readonly prisma: PrismaService,
    private readonly jobs: ExportJobs,
    config: Config,
  ) {
    const key = config.values.TOLLGATE_SECRET_KEY;
    this.box = key ? new SecretBox(key) : null;
  }

  async load(exporterId: string): Promise<ExporterRecord | null> {
    const row = await this.prisma.exporter.findUnique({ where: { id: exporterId } });
    return row ? recordOf(row) : null;
  }

  /** Every active exporter gets a drain: flushes batches that waited long enough, repairs lost jobs. */
  async tick(): Promise<{ exporters: number }> {
    const rows = await this.prisma.exporter.findMany({ where: { status: 'active' }, select: { id: true } });
    for (const { id } of rows) await this.jobs.drain(id);
    return { exporters: rows.length };
  }

  /** Cuts and enqueues the next batch when one is due. At most one batch per exporter is in flight. */
  async drain(exporterId: string): Promise<{ state: string; batchId?: string; waitMs?: number }> {
    for (let skipped = 0; skipped < 100; skipped++) {
      const exporter = await this.load(exporterId);
      if (!exporter || exporter.status !== 'active') return { state: 'idle' };
      if (exporter.inFlightBatch) {
        await this.repairJobs(exporter);
        return { state: 'in_flight', batchId: exporter.inFlightBatch };
      }
      const { batch } = exporter.settings;
      const rows = await readEventsAfter(this.prisma, exporter.checkpoint, batch.maxEvents, exporter.projectId);
      const cut = cutBatch(rows, typesOf(exporter), batch, Date.now());
      if (!cut.flush) return { state: rows.length ? 'waiting' : 'caught_up', waitMs: cut.waitMs };
      const to = checkpointAfter(exporter.checkpoint, cut.rows);
      if (cut.events.length === 0) {
        // Nothing this exporter sends in the range: pass it and look further.
        if (!(await skipRange(this.prisma, exporter.id, exporter.checkpoint, to))) return { state: 'raced' };
        continue;
      }
      const batchId = newId('xb');
      const jobId = `${batchId}-1`;
      const claimed = await claimBatch(this.prisma, { id: batchId, exporterId: exporter.id, from: exporter.checkpoint, to, logRows: cut.rows.length, eventCount: cut.events.length, jobId });
      if (!claimed) return { state: 'raced' };
      // Should this add fail (Redis down), the batch stays in flight without a job; the next drain repairs it.
      await this.jobs.deliver(batchId, jobId, exporter);
      return { state: 'cut', batchId };
    }
    return { state: 'skipping' };
  }

  /**
   * A batch whose job Redis lost, or whose job failed without a verdict (the database was down
   * on the last attempt, or the job stalled too often), gets a new job. Redis losing everything
   * therefore loses no batch.
   */
  private async repairJobs(exporter: ExporterRecord): Promise<void> {
    const pending = await listBatches(this.prisma, exporter.id, ['in_flight', 'retrying']);
    for (const batch of pending) {
      const job = batch.jobId ? await this.jobs.queue.getJob(batch.jobId) : undefined;
      const state = job ? await job.getState() : 'missing';
      if (state !== 'missing' && state !== 'failed' && state !== 'completed' && state !== 'unknown') continue;
      const jobId = `${batch.id}-${Date.now().toString(36)}`;
      await setBatchJob(this.prisma, batch.id, jobId);
      await this.jobs.deliver(batch.id, jobId, exporter);
      this.logger.warn({ msg: 'batch job re-created', exporter: exporter.name, batch: batch.id, previousJobState: state });
    }
    if (exporter.inFlightBatch && !pending.some((b) => b.id === exporter.inFlightBatch)) {
      // The pointer outlived its row (cannot happen through the statements above; repaired anyway).
      await this.prisma.exporter.updateMany({ where: { id: exporter.id, inFlightBatch: exporter.inFlightBatch }, data: { inFlightBatch: null } });
    }
  }

  /** One attempt at delivering a batch. Throws to have BullMQ retry; UnrecoverableError when settled as failed. */
  async deliver(attempt: DeliveryAttempt): Promise<{ state: string; events?: number }> {
    const batch = await findBatch(this.prisma, attempt.batchId);
    if (!batch || batch.status === 'dead') return { state: 'gone' };
    const exporter = await this.load(batch.exporterId);
    if (!exporter) return { state: 'gone' };

    let secrets: ExporterSecrets;
    try {
      secrets = this.secretsOf(exporter);
    } catch (err) {
      // Not the sink's fault and not the batch's: pause, keep the batch; resume picks it up again.
      const reason = (err as Error).message;
      await pauseExporter(this.prisma, exporter.id, reason);
      throw new UnrecoverableError(reason);
    }

    const rows = await readRange(this.prisma, exporter.projectId, batch);
    const types = typesOf(exporter);
    const events = rows.filter((r) => matchesTypes(types, r.type)).map(toWireEvent);
    const started = process.hrtime.bigint();
    try {
      await this.send(exporter, secrets, batch, events);
    } catch (err) {
      const failure = err instanceof SinkError ? err : new SinkError(String((err as Error)?.message ?? err), false);
      exporterBatchLatency.observe({ type: exporter.type }, Number(process.hrtime.bigint() - started) / 1e9);
      await recordAttempt(this.prisma, batch.id, failure.message);
      const final = failure.permanent || attempt.attemptsMade + 1 >= attempt.maxAttempts;
      if (!final) {
        exporterBatches.inc({ type: exporter.type, result: 'retry' });
        throw failure;
      }
      exporterBatches.inc({ type: exporter.type, result: 'dead_lettered' });
      const why = failure.permanent ? failure.message : `${failure.message} (after ${attempt.maxAttempts} attempts)`;
      const { paused } = await deadLetterBatch(this.prisma, batch.id, why, exporter.settings.pauseAfterFailures);
      this.logger.warn({ msg: 'batch dead-lettered', exporter: exporter.name, project: exporter.projectId, batch: batch.id, events: events.length, error: why, paused });
      if (batch.status === 'in_flight') await this.drainAfter(exporter.id);
      throw new UnrecoverableError(why);
    }
    exporterBatchLatency.observe({ type: exporter.type }, Number(process.hrtime.bigint() - started) / 1e9);
    exporterBatches.inc({ type: exporter.type, result: 'delivered' });
    exporterEvents.inc({ type: exporter.type }, events.length);
    await completeBatch(this.prisma, batch.id);
    if (batch.status === 'in_flight') await this.drainAfter(exporter.id);
    return { state: 'delivered', events: events.length };
  }

  /** The next batch at once, in the same job (a failure here is left to the next tick). */
  private async drainAfter(exporterId: string): Promise<void> {
    try {
      await this.drain(exporterId);
    } catch (err) {
      this.logger.warn({ msg: 'drain after delivery failed; the next tick retries', exporterId, error: (err as Error).message });
    }
  }

  private secretsOf(exporter: ExporterRecord): ExporterSecrets {
    if (!exporter.sealedSecrets) return {};
    if (!this.box) throw new SecretKeyError('TOLLGATE_SECRET_KEY is not set on the worker, so this exporter\'s secrets cannot be opened; set it and resume the exporter');
    return this.box.open<ExporterSecrets>(exporter.sealedSecrets, exporter.id);
  }

  private async send(exporter: ExporterRecord, secrets: ExporterSecrets, batch: BatchRow, events: WireEvent[]): Promise<void> {
    const s = exporter.settings;
    if (s.type === 'webhook') {
      if (!secrets.signingSecret) throw new SinkError('webhook exporter has no signing secret', true);
      const req = webhookRequest({ batch: { batchId: batch.id, exporter: exporter.name, projectId: exporter.projectId, events }, signingSecret: secrets.signingSecret, headers: secrets.headers });
      await postToSink(s.url, req.body, { ...req.headers, 'x-tollgate-exporter': exporter.name }, s.timeoutMs);
      return;
    }
    const body = JSON.stringify(toOtlpTraces(events, s.serviceName));
    await postToSink(tracesUrl(s.endpoint), body, { ...(secrets.headers ?? {}), 'content-type': 'application/json' }, s.timeoutMs);
  }
}
