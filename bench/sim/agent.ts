import { exchange, type Outcome } from './http';
import type { Journal } from './journal';
import { actualUsage, planStep, type StepPlan } from './plan';
import { Random } from './prng';
import { requestLimits, type AgentSpec, type World } from './world';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Steps an agent makes at most, whatever the duration (a bound, not a target). */
const MAX_STEPS = 20_000;
/** Tries of one request (busy, 503, lost answers, no service up) before the agent gives up on it. */
const MAX_TRIES = 8;
const REQUEST_TIMEOUT_MS = 15_000;

export interface SimContext {
  seed: number;
  key: string;
  world: World;
  journal: Journal;
  services: { size: number; url(i: number): string | undefined };
  ttlMs: number;
  /** Some steps outlive their reservation's lease (StepPlan.outlives), and every one uses what it held. */
  lateSteps: boolean;
  /** Date.now() after which no step begins. */
  deadline: number;
  /** Set when the agents overran their time: every retry loop ends. */
  stopped: { now: boolean };
}

interface Reservation {
  id: string;
  inputTokens: number;
  outputTokens: number;
  estimatedCost: number;
  expiresAt: string;
}

type CheckResult =
  { kind: 'reserved'; reservation: Reservation } | { kind: 'denied' | 'tentative' | 'failOpen' | 'gaveUp' };

/** An error answer's code, for the notes. */
function errorOf(body: unknown): string {
  const b = body as { code?: string; error?: string | { code?: string } } | undefined;
  return b?.code ?? (typeof b?.error === 'object' ? b.error.code : b?.error) ?? '';
}

/** One agent: its own run (traceId), a closed loop of steps, each planned from its own stream. */
export class Agent {
  private readonly plans: Random;
  /** Jitter and failover: drawn as answers come, so kept off the plans' stream. */
  private readonly jitter: Random;
  private svc: number;
  private readonly limits: Record<string, unknown>[];

  constructor(
    private readonly spec: AgentSpec,
    private readonly sim: SimContext,
  ) {
    this.plans = new Random(sim.seed, `agent-${spec.index}`);
    this.jitter = new Random(sim.seed, `jitter-${spec.index}`);
    this.svc = spec.home;
    this.limits = requestLimits(sim.world, spec.context);
  }

  private get name(): string {
    return this.spec.name;
  }

  async run(): Promise<void> {
    for (let i = 0; i < MAX_STEPS && Date.now() < this.sim.deadline && !this.sim.stopped.now; i++) {
      const plan = planStep(this.plans, this.spec.models);
      const denied = await this.step(plan, `${this.spec.context.traceId}-s${i}`);
      await sleep(denied ? plan.deniedPauseMs : plan.thinkMs);
    }
  }

  /** Resolves to whether the step was denied. */
  private async step(plan: StepPlan, stepId: string): Promise<boolean> {
    if (plan.kind === 'plain') {
      await this.ingest(this.plainEvents(plan, stepId), plan.duplicate);
      return false;
    }
    if (plan.kind !== 'reserve') {
      await this.readCheck(plan, stepId);
      return false;
    }
    const result = await this.reserveWithRetries(plan, stepId);
    if (result.kind === 'failOpen') {
      // failMode open: the step runs unguarded, and is recorded without a reservation.
      await sleep(plan.stepMs);
      await this.ingest([this.stepEvent(plan, stepId, actualUsage(plan, this.estimateHeld(plan)))], plan.duplicate);
      return false;
    }
    if (result.kind !== 'reserved') return result.kind === 'denied';
    const r = result.reservation;
    if (plan.fate === 'abandon') {
      this.sim.journal.log(this.name, `abandon ${r.id} (${stepId}) to lapse at ${r.expiresAt}`, [stepId, r.id]);
      return false;
    }
    await sleep(this.sim.lateSteps && plan.outlives ? this.sim.ttlMs + plan.outlivesByMs : plan.stepMs);
    // With late steps every step uses what it held: no slack below the limit hides a lease counted twice.
    const used = actualUsage(this.sim.lateSteps ? { ...plan, usage: 'at' } : plan, r);
    if (plan.fate === 'release') await this.release(r.id, stepId);
    else await this.ingest([this.stepEvent(plan, stepId, used, r.id)], plan.duplicate);
    return false;
  }

  private estimateHeld(plan: StepPlan) {
    return { inputTokens: plan.inputTokens, outputTokens: plan.maxOutputTokens };
  }

  private checkBody(plan: StepPlan, stepId: string, mode: 'reserve' | 'tentative' | 'dryRun' | 'read') {
    const { provider, model } = plan.model;
    return {
      context: this.spec.context,
      limits: this.limits,
      estimate: { provider, model, inputTokens: plan.inputTokens, maxOutputTokens: plan.maxOutputTokens },
      stepId,
      failMode: 'open',
      ...(mode === 'reserve' || mode === 'tentative' ? { reserve: true } : {}),
      ...(mode === 'tentative' ? { tentative: true } : {}),
      ...(mode === 'dryRun' ? { dryRun: true } : {}),
    };
  }

  /** A retried check (same stepId) next to the first, after its answer or at the same time. */
  private async reserveWithRetries(plan: StepPlan, stepId: string): Promise<CheckResult> {
    if (plan.retry === 'concurrent') {
      const [a, b] = await Promise.all([this.reserve(plan, stepId), this.reserve(plan, stepId)]);
      this.compareRetry(stepId, a, b);
      return a.kind === 'reserved' ? a : b;
    }
    const first = await this.reserve(plan, stepId);
    if (plan.retry === 'none') return first;
    const again = await this.reserve(plan, stepId);
    this.compareRetry(stepId, first, again);
    return first.kind === 'reserved' ? first : again;
  }

  private compareRetry(stepId: string, a: CheckResult, b: CheckResult): void {
    if (a.kind === 'reserved' && b.kind === 'reserved' && a.reservation.id !== b.reservation.id) {
      this.sim.journal.note('a retried check (same stepId) got another reservation');
      this.sim.journal.log(this.name, `retry of ${stepId} got ${b.reservation.id}, first ${a.reservation.id}`, [
        stepId,
      ]);
    }
  }

  /** A tentative check first when the plan says so; then the step's own check. */
  private async reserve(plan: StepPlan, stepId: string): Promise<CheckResult> {
    if (plan.tentative) {
      const t = await this.check(plan, stepId, 'tentative');
      if (t.kind !== 'tentative') return t;
    }
    return this.check(plan, stepId, 'reserve');
  }

  private async check(plan: StepPlan, stepId: string, mode: 'reserve' | 'tentative'): Promise<CheckResult> {
    const j = this.sim.journal;
    const body = this.checkBody(plan, stepId, mode);
    for (let tries = 0; tries < MAX_TRIES && !this.sim.stopped.now; tries++) {
      const out = await this.send('POST /v1/guard/check', '/v1/guard/check', body);
      if (out.kind === 'lost') {
        j.lostChecks.add(stepId);
        j.log(this.name, `check ${mode} ${stepId} → no answer (${out.error})`, [stepId]);
        continue;
      }
      if (out.kind !== 'answer') continue;
      const verdict = this.checkVerdict(out, stepId, mode);
      if (verdict === 'retry') await this.pause(out);
      else return verdict;
    }
    j.log(this.name, `check ${mode} ${stepId} given up`, [stepId]);
    return { kind: 'gaveUp' };
  }

  private checkVerdict(out: Extract<Outcome, { kind: 'answer' }>, stepId: string, mode: string): CheckResult | 'retry' {
    const j = this.sim.journal;
    const b = out.body as { decision?: string; reason?: string; reservation?: Reservation } | undefined;
    const line = `check ${mode} ${stepId} → ${out.status} ${b?.decision ?? ''}${b?.reason ? ` (${b.reason})` : ''}`;
    if (out.status === 503 || out.status === 429 || (out.status === 200 && b?.reason === 'busy')) {
      j.log(this.name, line, [stepId]);
      return 'retry';
    }
    if (out.status !== 200 || !b) {
      j.log(this.name, `${line} ${out.text.slice(0, 200)}`, [stepId]);
      // A 409: a retried check whose step's reservation closed meanwhile (its first answer was lost).
      if (out.status < 500) j.note(`check answered ${out.status} ${errorOf(out.body)}`);
      return { kind: 'gaveUp' };
    }
    if (b.reservation) {
      const r = b.reservation;
      j.received.set(r.id, { stepId, agent: this.name, ...r });
      j.log(this.name, `${line} ${r.id} holds in=${r.inputTokens} out=${r.outputTokens} $${r.estimatedCost}`, [
        stepId,
        r.id,
      ]);
      return { kind: 'reserved', reservation: r };
    }
    j.log(this.name, line, [stepId]);
    if (b.reason === 'tentative') return { kind: 'tentative' };
    if (b.reason?.startsWith('guard unavailable')) {
      j.failModeChecks.add(stepId);
      return { kind: 'failOpen' };
    }
    if (b.decision === 'allow') j.note('a reserving check allowed without a reservation');
    return { kind: 'denied' };
  }

  private async readCheck(plan: StepPlan, stepId: string): Promise<void> {
    const mode = plan.kind === 'dryRun' ? 'dryRun' : 'read';
    const out = await this.send('POST /v1/guard/check', '/v1/guard/check', this.checkBody(plan, stepId, mode));
    const what = out.kind === 'answer' ? `${out.status} ${(out.body as { decision?: string })?.decision}` : out.kind;
    this.sim.journal.log(this.name, `check ${mode} ${stepId} → ${what}`, [stepId]);
  }

  private async release(id: string, stepId: string): Promise<void> {
    const path = `/v1/guard/reservations/${id}/release`;
    for (let tries = 0; tries < MAX_TRIES && !this.sim.stopped.now; tries++) {
      const out = await this.send('POST /v1/guard/reservations/:id/release', path, {});
      if (out.kind !== 'answer') continue;
      const status = (out.body as { status?: string } | undefined)?.status;
      this.sim.journal.log(this.name, `release ${id} (${stepId}) → ${out.status} ${status ?? out.text.slice(0, 200)}`, [
        stepId,
        id,
      ]);
      if (out.status === 503 || out.status === 429) await this.pause(out);
      else return;
    }
  }

  private occurredAt(plan: StepPlan): string {
    const offset = plan.when === 'late' ? -60_000 : plan.when === 'future' ? plan.aheadMs : 0;
    return new Date(Date.now() + offset).toISOString();
  }

  private stepEvent(
    plan: StepPlan,
    eventId: string,
    usage: { inputTokens: number; outputTokens: number },
    reservationId?: string,
  ): Record<string, unknown> {
    return {
      eventId,
      occurredAt: this.occurredAt(plan),
      ...this.spec.context,
      entityType: 'agent',
      entityName: this.name,
      provider: plan.model.provider,
      model: plan.model.model,
      usage,
      ...(reservationId ? { reservationId } : {}),
    };
  }

  /** A step recorded without asking the guard first: it counts, and no reservation covers it. */
  private plainEvents(plan: StepPlan, stepId: string): Record<string, unknown>[] {
    return Array.from({ length: plan.plainEvents }, (_, k) =>
      this.stepEvent(plan, `${stepId}-p${k}`, {
        inputTokens: Math.max(1, Math.floor(plan.inputTokens * plan.inputFactor)),
        outputTokens: Math.floor(plan.maxOutputTokens * plan.outputFactor),
      }),
    );
  }

  private async ingest(events: Record<string, unknown>[], duplicate: StepPlan['duplicate']): Promise<void> {
    if (duplicate === 'concurrent') {
      await Promise.all([this.ingestOnce(events), this.ingestOnce(events)]);
      return;
    }
    await this.ingestOnce(events);
    if (duplicate === 'after') await this.ingestOnce(events);
  }

  /** Sent until answered (same event ids: a retry is a duplicate, never a second step). */
  private async ingestOnce(events: Record<string, unknown>[]): Promise<void> {
    const j = this.sim.journal;
    const ids = events.map((e) => String(e.eventId));
    const keys = [...ids, ...events.flatMap((e) => (e.reservationId ? [String(e.reservationId)] : []))];
    for (let tries = 0; tries < MAX_TRIES && !this.sim.stopped.now; tries++) {
      const out = await this.send('POST /v1/events', '/v1/events', { events });
      if (out.kind === 'lost') {
        for (const id of ids) j.tally(id).lost++;
        j.log(this.name, `ingest ${ids.join(',')} → no answer (${out.error})`, keys);
        continue;
      }
      if (out.kind !== 'answer') continue;
      if (out.status === 503 || out.status === 429) {
        j.log(this.name, `ingest ${ids.join(',')} → ${out.status}`, keys);
        await this.pause(out);
        continue;
      }
      this.recordIngest(out, ids, keys, events);
      return;
    }
    j.log(this.name, `ingest ${ids.join(',')} given up`, keys);
  }

  private recordIngest(
    out: Extract<Outcome, { kind: 'answer' }>,
    ids: string[],
    keys: string[],
    events: Record<string, unknown>[],
  ): void {
    const j = this.sim.journal;
    type Result = { eventId: string | null; status: 'accepted' | 'duplicate' | 'rejected'; reason?: string };
    const results = (out.body as { results?: Result[] } | undefined)?.results;
    if (out.status !== 200 || !results) {
      j.log(this.name, `ingest ${ids.join(',')} → ${out.status} ${out.text.slice(0, 200)}`, keys);
      if (out.status < 500) j.note(`ingest answered ${out.status} ${errorOf(out.body)}`);
      return;
    }
    const parts = results.map((r, i) => {
      const t = j.tally(ids[i]);
      t[r.status]++;
      if (r.status === 'rejected') {
        t.reasons.push(r.reason ?? '?');
        j.note(`event rejected: ${(r.reason ?? '?').replace(/\(.*\)/, '(…)')}`);
      }
      return `${ids[i]} ${r.status}${r.reason ? ` (${r.reason})` : ''}`;
    });
    const usage = events.map((e) => {
      const u = e.usage as { inputTokens: number; outputTokens: number };
      return `in=${u.inputTokens} out=${u.outputTokens} at ${String(e.occurredAt).slice(11, 23)}`;
    });
    const settles = events[0].reservationId ? ` settles ${String(events[0].reservationId)}` : '';
    j.log(this.name, `ingest${settles} ${usage.join('; ')} → ${out.status} ${parts.join('; ')}`, keys);
  }

  /** Waits as the answer asks (Retry-After, retryAfterMs), bounded, with jitter. */
  private async pause(out: Extract<Outcome, { kind: 'answer' }>): Promise<void> {
    const hinted =
      (out.body as { retryAfterMs?: number } | undefined)?.retryAfterMs ?? Number(out.retryAfter ?? 0.2) * 1000;
    await sleep(Math.min(1000, Math.max(20, hinted)) * (0.5 + this.jitter.float()));
  }

  /**
   * One request to the agent's service, moving on to the next when it is down or refuses the
   * connection (as a load balancer would); an answer is recorded with its status.
   */
  private async send(route: string, path: string, body: unknown): Promise<Outcome> {
    const n = this.sim.services.size;
    for (let tries = 0; tries < 4 * n + 4 && !this.sim.stopped.now; tries++) {
      const url = this.sim.services.url(this.svc);
      const out = url ? await exchange(url, 'POST', path, this.sim.key, body, REQUEST_TIMEOUT_MS) : undefined;
      if (out?.kind === 'answer') {
        this.sim.journal.answer(this.name, route, out.status, out.retryAfter, out.text);
        return out;
      }
      // A service that did not answer is likely going down: the next request goes elsewhere.
      this.svc = (this.svc + 1) % n;
      if (out?.kind === 'lost') return out;
      await sleep(50 + this.jitter.int(0, 100));
    }
    return { kind: 'refused' };
  }
}
