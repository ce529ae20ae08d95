import { Injectable, Logger } from '@nestjs/common';
import { checkpointAfter, PrismaService, readEventsAfter } from '@tollgate/database';
import { exporterBatches, exporterBatchLatency, exporterEvents } from '@tollgate/telemetry';
import { Config } from '@tollgate/platform';
import { UnrecoverableError } from 'bullmq';
import { randomBytes } from 'node:crypto';
import { Destinations } from '../destination/destinations';
import { recordOf, typesOf, type ExporterRecord } from '../exporter/exporter-record';
import type { ExporterSecrets } from '../exporter/exporter-settings';
import { SecretBox, SecretKeyError } from '../exporter/secret-box';
import { toOtlpTraces, tracesUrl } from '../wire/otlp';
import { slackMessage } from '../wire/slack';
import { webhookRequest } from '../wire/webhook';
import { toWireEvent, type WireEvent } from '../wire/wire-event';
import { cutBatch, matchesTypes } from './batching';
import { ExportJobs } from './export-jobs';
import {
  claimBatch,
  completeBatch,
  deadLetterBatch,
  findBatch,
  listBatches,
  pauseExporter,
  readRange,
  recordAttempt,
  setBatchJob,
  skipRange,
  type BatchRow,
} from './export-state.sql';
import { ProjectShares } from './project-shares';
import { postToSink } from './sink-client';
import { backoffMs, SinkError } from './sink-error';

/** How long one drain job keeps sending batches before it hands over to a new job. */
const DRAIN_BUDGET_MS = 5000;

/** A job over its project's share comes back after about this long (jittered, so deferred jobs spread out). */
const deferMs = () => 150 + Math.round(Math.random() * 100);

/** The slot a job holds in its project's share, once it took one. */
interface Slot {
  release: (() => void) | null;
}

const newId = (prefix: string) => `${prefix}_${randomBytes(10).toString('hex')}`;

type Outcome =
  | { result: 'delivered' }
  | { result: 'retry'; failure: SinkError }
  | { result: 'dead'; failure: SinkError; paused: boolean };

/**
 * An exporter's stream: cut the next batch after the checkpoint, send it, and move the
 * checkpoint only once the sink acknowledged it or it was recorded as a dead letter.
 *
 * The drain job sends each batch's first attempt itself, with the rows it just read (one read
 * per batch in the steady state); a batch that fails goes to an `export.deliver` job, which
 * BullMQ retries with backoff, re-reading the batch's range from the log. The log is the buffer:
 * a slow sink leaves events waiting in PostgreSQL, never in this process, and ingest never
 * waits for an exporter.
 */
@Injectable()
export class ExportPipeline {
  private readonly logger = new Logger('exporters');
  private readonly box: SecretBox | null;
  private readonly shares: ProjectShares;
  private readonly maxTimeoutMs: number;

  constructor(
    private readonly prisma: PrismaService,
    private readonly jobs: ExportJobs,
    private readonly destinations: Destinations,
    config: Config,
  ) {
    const key = config.values.TOLLGATE_SECRET_KEY;
    this.box = key ? new SecretBox(key) : null;
    this.shares = new ProjectShares(config.values.EXPORTS_CONCURRENCY);
    this.maxTimeoutMs = config.values.EXPORTS_MAX_TIMEOUT_MS;
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

  /**
   * Sends the exporter's due batches, one at a time, for up to DRAIN_BUDGET_MS. `jobId` is the
   * drain job running this: a batch claimed under it and found still in flight means this job
   * was interrupted (its worker died) and now takes the batch over.
   */
  async drain(exporterId: string, jobId: string): Promise<{ state: string; batches: number; waitMs?: number }> {
    const slot: Slot = { release: null };
    try {
      return await this.drainIn(slot, exporterId, jobId);
    } finally {
      slot.release?.();
    }
  }

  private async drainIn(
    slot: Slot,
    exporterId: string,
    jobId: string,
  ): Promise<{ state: string; batches: number; waitMs?: number }> {
    const deadline = Date.now() + DRAIN_BUDGET_MS;
    let batches = 0;
    for (let round = 0; ; round++) {
      const exporter = await this.load(exporterId);
      if (!exporter || exporter.status !== 'active') return { state: 'idle', batches };
      if (exporter.inFlightBatch) {
        await this.repairJobs(exporter, jobId);
        return { state: 'in_flight', batches };
      }
      if (Date.now() > deadline || round > 10_000) {
        await this.jobs.drain(exporterId);
        return { state: 'continued', batches };
      }
      const { batch } = exporter.settings;
      const rows = await readEventsAfter(this.prisma, exporter.checkpoint, batch.maxEvents, exporter.projectId);
      const cut = cutBatch(rows, typesOf(exporter), batch, Date.now());
      if (!cut.flush) return { state: rows.length ? 'waiting' : 'caught_up', batches, waitMs: cut.waitMs };
      const to = checkpointAfter(exporter.checkpoint, cut.rows);
      if (cut.events.length === 0) {
        // Nothing this exporter sends in the range: pass it and look further.
        if (!(await skipRange(this.prisma, exporter.id, exporter.checkpoint, to))) return { state: 'raced', batches };
        continue;
      }
      let secrets: ExporterSecrets;
      try {
        secrets = this.secretsOf(exporter);
      } catch (err) {
        await pauseExporter(this.prisma, exporter.id, (err as Error).message);
        return { state: 'paused', batches };
      }
      slot.release ??= this.shares.tryEnter(exporter.projectId);
      if (!slot.release) {
        // The project has its share of the slots running: this one goes to the next job in the queue.
        await this.jobs.drain(exporterId, deferMs());
        return { state: 'deferred', batches };
      }
      const claim = {
        id: newId('xb'),
        exporterId: exporter.id,
        from: exporter.checkpoint,
        to,
        logRows: cut.rows.length,
        eventCount: cut.events.length,
        jobId,
      };
      if (!(await claimBatch(this.prisma, claim))) return { state: 'raced', batches };
      const claimed: BatchRow = {
        ...claim,
        status: 'in_flight',
        attempts: 0,
        lastError: null,
        createdAt: new Date(),
        failedAt: null,
      };
      const outcome = await this.attempt(exporter, secrets, claimed, cut.events, cut.serialized);
      batches++;
      if (outcome.result === 'retry') {
        await this.scheduleRetry(exporter, claimed.id, 1);
        return { state: 'retrying', batches };
      }
    }
  }

  private async scheduleRetry(
    exporter: ExporterRecord,
    batchId: string,
    priorAttempts: number,
    previous?: SinkError,
    delayMs?: number,
  ): Promise<void> {
    const jobId = `${batchId}-${Date.now().toString(36)}`;
    await setBatchJob(this.prisma, batchId, jobId);
    const { retry } = exporter.settings;
    await this.jobs.deliver(
      batchId,
      jobId,
      exporter,
      priorAttempts,
      delayMs ??
        backoffMs(priorAttempts, retry.initialBackoffMs, retry.maxBackoffMs, Math.random, previous?.retryAfterMs),
    );
  }

  /**
   * A batch whose job is gone — Redis lost it, it failed without a verdict (the database was
   * down on its last attempt), or it is this very job re-run after its worker died — gets a new
   * delivery job. Redis losing everything therefore loses no batch.
   */
  private async repairJobs(exporter: ExporterRecord, currentJobId: string): Promise<void> {
    const pending = await listBatches(this.prisma, exporter.id, ['in_flight', 'retrying']);
    for (const batch of pending) {
      const job = batch.jobId && batch.jobId !== currentJobId ? await this.jobs.queue.getJob(batch.jobId) : undefined;
      const state = job ? await job.getState() : 'missing';
      if (state !== 'missing' && state !== 'failed' && state !== 'completed' && state !== 'unknown') continue;
      await this.scheduleRetry(exporter, batch.id, batch.attempts);
      this.logger.warn({
        msg: 'batch taken over',
        exporter: exporter.name,
        batch: batch.id,
        previousJob: batch.jobId,
        previousJobState: batch.jobId === currentJobId ? 'interrupted' : state,
      });
    }
    if (exporter.inFlightBatch && !pending.some((b) => b.id === exporter.inFlightBatch)) {
      // The pointer outlived its row (the statements never leave it so; repaired anyway).
      await this.prisma.exporter.updateMany({
        where: { id: exporter.id, inFlightBatch: exporter.inFlightBatch },
        data: { inFlightBatch: null },
      });
    }
  }

  /** A retry of a batch (export.deliver). Throws to have BullMQ back off; UnrecoverableError once settled as failed. */
  async deliver(batchId: string): Promise<{ state: string; events?: number }> {
    const batch = await findBatch(this.prisma, batchId);
    if (!batch || batch.status === 'dead') return { state: 'gone' };
    const exporter = await this.load(batch.exporterId);
    if (!exporter) return { state: 'gone' };
    const release = this.shares.tryEnter(exporter.projectId);
    if (!release) {
      // Its project has its share of the slots running: the same attempt, a little later.
      await this.scheduleRetry(exporter, batch.id, batch.attempts, undefined, deferMs());
      return { state: 'deferred' };
    }
    try {
      return await this.deliverIn(exporter, batch);
    } finally {
      release();
    }
  }

  private async deliverIn(exporter: ExporterRecord, batch: BatchRow): Promise<{ state: string; events?: number }> {
    let secrets: ExporterSecrets;
    try {
      secrets = this.secretsOf(exporter);
    } catch (err) {
      // Not the sink's fault nor the batch's: pause; resume repairs the batch's job.
      const reason = (err as Error).message;
      await pauseExporter(this.prisma, exporter.id, reason);
      throw new UnrecoverableError(reason);
    }
    const rows = await readRange(this.prisma, exporter.projectId, batch);
    const types = typesOf(exporter);
    const events = rows.filter((r) => matchesTypes(types, r.type)).map(toWireEvent);
    const outcome = await this.attempt(exporter, secrets, batch, events);
    // The stream's batch is settled (or will be retried): the next one is due now.
    if (batch.status === 'in_flight' && outcome.result !== 'retry')
      await this.jobs.drain(exporter.id).catch(() => undefined);
    if (outcome.result === 'retry') throw outcome.failure;
    if (outcome.result === 'dead') throw new UnrecoverableError(outcome.failure.message);
    return { state: 'delivered', events: events.length };
  }

  /** One attempt: the sink's answer settles the batch (delivered, dead-lettered) or asks for a retry. */
  private async attempt(
    exporter: ExporterRecord,
    secrets: ExporterSecrets,
    batch: BatchRow,
    events: WireEvent[],
    serialized?: string[],
  ): Promise<Outcome> {
    const started = process.hrtime.bigint();
    const elapsed = () => Number(process.hrtime.bigint() - started) / 1e9;
    try {
      await this.send(exporter, secrets, batch, events, serialized);
    } catch (err) {
      exporterBatchLatency.observe({ type: exporter.type }, elapsed());
      // Anything but a SinkError is ours, not the sink's: retried, and its text kept in the log only.
      const failure =
        err instanceof SinkError
          ? err
          : new SinkError(
              'the delivery failed in the worker (see its log)',
              false,
              undefined,
              undefined,
              String((err as Error)?.message ?? err),
            );
      if (failure.detail)
        this.logger.warn({
          msg: 'delivery failed',
          exporter: exporter.name,
          project: exporter.projectId,
          batch: batch.id,
          error: failure.message,
          cause: failure.detail,
        });
      await recordAttempt(this.prisma, batch.id, failure.message);
      const attempts = batch.attempts + 1;
      if (!failure.permanent && attempts < exporter.settings.retry.maxAttempts) {
        exporterBatches.inc({ type: exporter.type, result: 'retry' });
        return { result: 'retry', failure };
      }
      exporterBatches.inc({ type: exporter.type, result: 'dead_lettered' });
      const why = failure.permanent ? failure.message : `${failure.message} (after ${attempts} attempts)`;
      const { paused } = await deadLetterBatch(this.prisma, batch.id, why, exporter.settings.pauseAfterFailures);
      this.logger.warn({
        msg: 'batch dead-lettered',
        exporter: exporter.name,
        project: exporter.projectId,
        batch: batch.id,
        events: events.length,
        error: why,
        paused,
      });
      return { result: 'dead', failure: new SinkError(why, true, failure.status), paused };
    }
    exporterBatchLatency.observe({ type: exporter.type }, elapsed());
    exporterBatches.inc({ type: exporter.type, result: 'delivered' });
    exporterEvents.inc({ type: exporter.type }, events.length);
    await completeBatch(this.prisma, batch.id);
    return { result: 'delivered' };
  }

  private secretsOf(exporter: ExporterRecord): ExporterSecrets {
    if (!exporter.sealedSecrets) return {};
    if (!this.box)
      throw new SecretKeyError(
        "TOLLGATE_SECRET_KEY is not set on the worker, so this exporter's secrets cannot be opened; set it and resume the exporter",
      );
    return this.box.open<ExporterSecrets>(exporter.sealedSecrets, exporter.id);
  }

  private async send(
    exporter: ExporterRecord,
    secrets: ExporterSecrets,
    batch: BatchRow,
    events: WireEvent[],
    serialized?: string[],
  ): Promise<void> {
    const s = exporter.settings;
    // An exporter saved under a higher cap (or before there was one) gets today's.
    const timeoutMs = Math.min(s.timeoutMs, this.maxTimeoutMs);
    if (s.type === 'webhook') {
      if (!secrets.signingSecret) throw new SinkError('webhook exporter has no signing secret', true);
      const req = webhookRequest({
        batch: { batchId: batch.id, exporter: exporter.name, projectId: exporter.projectId, events },
        signingSecret: secrets.signingSecret,
        headers: secrets.headers,
        serializedEvents: serialized,
      });
      await postToSink(
        this.destinations,
        s.url,
        req.body,
        { ...req.headers, 'x-tollgate-exporter': exporter.name },
        timeoutMs,
      );
      return;
    }
    if (s.type === 'slack') {
      if (!secrets.url) throw new SinkError('slack exporter has no webhook URL', true);
      const message = slackMessage(events, { exporter: exporter.name, dashboardUrl: s.dashboardUrl });
      await postToSink(
        this.destinations,
        secrets.url,
        JSON.stringify(message),
        { 'content-type': 'application/json' },
        timeoutMs,
      );
      return;
    }
    const body = JSON.stringify(toOtlpTraces(events, s.serviceName));
    await postToSink(
      this.destinations,
      tracesUrl(s.endpoint),
      body,
      { ...(secrets.headers ?? {}), 'content-type': 'application/json' },
      timeoutMs,
    );
  }
}
