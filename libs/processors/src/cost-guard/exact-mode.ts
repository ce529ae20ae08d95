import { fromAiSdk } from '../../../contracts/src/usage/normalize-usage';
import type { MessageTokenCounter } from '../token-count/message-token-counter';
import { TOKENS_PER_CONVERSATION } from '../token-count/message-token-counter';
import { checkUntilServed, isBusy, type ServedCheck } from '../tollgate/busy-retry';
import type {
  GuardCheckRequest,
  GuardCheckResponse,
  GuardContext,
  GuardFinding,
  TollgateGuardClient,
} from '../tollgate/guard-client';
import { CHECK_AHEAD_TOKENS, ChecksAhead, fitsPlainly } from './check-ahead';
import { tryFallbackModel, type FallbackGuard } from './fallback-model';
import type { CostGuardResponseArgs, CostGuardStepArgs, CostGuardStepResult, FinishPayload } from './mastra-args';
import type { GuardConfig } from './options';
import { finding, type CostGuardTripwireMetadata, type StepOutcomes } from './outcomes';
import { RecordDelivery } from './record-delivery';
import type { RunState } from './run-state';
import { adjustedStep } from './shrink';
import { planStepCheck, type StepCheck } from './step-check';

type StepArgs<Id extends string> = CostGuardStepArgs<CostGuardTripwireMetadata<Id>>;

/**
 * The guard with a Tollgate client (exact): each step reserves its worst-case cost before the
 * LLM call, and its actual usage is recorded after it, which settles the reservation.
 */
export class ExactMode<Id extends string> {
  private readonly records: RecordDelivery;
  private readonly ahead: ChecksAhead;
  private readonly fallback: FallbackGuard;

  constructor(
    private readonly config: GuardConfig<Id>,
    private readonly client: TollgateGuardClient,
    private readonly counter: MessageTokenCounter,
    private readonly outcomes: StepOutcomes<Id>,
  ) {
    const { options, log } = config;
    this.records = new RecordDelivery(client, options.awaitRecords === true, log);
    this.ahead = new ChecksAhead(
      client,
      (reservationId, why) => this.records.release(reservationId, why),
      options.checkAheadTokens ?? CHECK_AHEAD_TOKENS,
    );
    this.fallback = {
      processorId: config.id,
      fallbackModel: options.fallbackModel,
      log,
      ask: (request) => this.ask(request),
    };
  }

  /** Records the run's earlier steps that `processLLMResponse` did not (see {@link RecordDelivery.settleFromSteps}). */
  settleFromSteps(run: RunState, steps: CostGuardStepArgs['steps'], ids: GuardContext): Promise<void> {
    return this.records.settleFromSteps(run, steps, ids);
  }

  /** Checks and reserves the step before its LLM call; the step's changed settings when it was shrunk or moved. */
  async checkStep(
    args: StepArgs<Id>,
    run: RunState,
    ids: GuardContext,
    maxCost: number,
    scopeKey: string | undefined,
  ): Promise<CostGuardStepResult | void> {
    const check = planStepCheck(this.config, args, run, ids, maxCost, this.estimateInputTokens(args));
    const early = this.ahead.take(run, args.stepNumber, check.own);
    // This run's records in flight when the check is sent may be counted at their reservations
    // (the worst case): an answer that binds is asked again once they landed, so that it binds on
    // what was spent.
    const racing = run.unflushed.length > 0 || run.inFlight.size > 0;
    let served: ServedCheck;
    try {
      served = await this.answer(run, check, early, racing, args.model);
    } catch (error) {
      run.pending.push(check.step);
      await this.records.drain(run);
      return this.outcomes.unavailable(args, maxCost, scopeKey, error);
    }
    return this.decide(args, run, check, served, maxCost, scopeKey);
  }

  /** Tollgate's answer for the step: the check ahead's when the step takes it, else its own (asked again if it binds while this run's records were not stored). */
  private async answer(
    run: RunState,
    check: StepCheck,
    early: Promise<GuardCheckResponse | undefined> | undefined,
    racing: boolean,
    model: StepArgs<Id>['model'],
  ): Promise<ServedCheck> {
    const ahead = early && (await early);
    if (ahead) return { response: ahead, elapsedMs: 0 };
    const served = await this.ask(check.own);
    if (!racing || !binds(served.response)) return served;
    await this.records.drain(run);
    const { response } = served;
    if (!response.adjust) return this.ask(check.requestFor(model, check.stepId));
    if (
      response.reservation &&
      this.client.guard.release &&
      (await this.records.release(response.reservation.id, 'to check again'))
    ) {
      return this.ask(check.requestFor(model, `${check.stepId}:settled`));
    }
    return served;
  }

  /** What the answer makes of the step: run as it is, shrunk or moved, warned about, or stopped. */
  private async decide(
    args: StepArgs<Id>,
    run: RunState,
    check: StepCheck,
    { response, elapsedMs }: ServedCheck,
    maxCost: number,
    scopeKey: string | undefined,
  ): Promise<CostGuardStepResult | void> {
    check.step.reservationId = response.reservation?.id;
    run.pending.push(check.step);
    run.allowed = fitsPlainly(response) ? { stepNumber: args.stepNumber, request: check.own } : undefined;
    // Before the check below: a busy answer is a deny without violations too, but not an outage.
    if (isBusy(response)) {
      await this.records.drain(run);
      return this.outcomes.busy(args, maxCost, scopeKey, elapsedMs);
    }
    // The SDK answers for an unreachable service itself: fail-closed comes back as a deny with no violation.
    if (response.decision === 'deny' && response.violations.length === 0) {
      await this.records.drain(run);
      return this.outcomes.unavailable(
        args,
        maxCost,
        scopeKey,
        new Error(response.reason ?? 'denied without a violation'),
      );
    }

    // Our own limit first; a project policy (source 'policy:<name>') or another limit type can deny the step too.
    const ours = (f: GuardFinding) => f.source === 'request' && f.scope === this.config.scope && f.limitType === 'cost';
    const hard =
      response.decision === 'deny'
        ? (response.violations.find(ours) ??
          response.violations.find((v) => v.limitType === 'cost') ??
          response.violations[0])
        : undefined;
    if (hard) {
      const moved = await tryFallbackModel(this.fallback, args, run, check, response.violations);
      if (moved) return moved;
      // The run ends here: the steps that ran are stored before the abort reaches the caller.
      await this.records.drain(run);
      return this.outcomes.violate(args, run, maxCost, scopeKey, finding(hard));
    }
    const soft = response.warnings.find((w) => ours(w) && w.threshold === 'soft');
    if (soft) await this.outcomes.warnSoft(run, scopeKey, finding(soft));
    if (response.adjust) {
      const { id } = this.config;
      return adjustedStep(
        id,
        args.modelSettings,
        response.adjust,
        args.model,
        undefined,
        check.requestedMaxOutputTokens,
      );
    }
  }

  /**
   * Records the step's usage as it ends (see `processLLMResponse`), and sends the next step's
   * check ahead when this one called tools.
   */
  async onLLMResponse(args: CostGuardResponseArgs, run: RunState): Promise<void> {
    const step = run.pending.findLast((p) => p.stepIndex === args.stepNumber);
    const finish = args.chunks.find((c) => c.type === 'finish' || c.type === 'step-finish');
    const payload = finish?.payload as FinishPayload | undefined;
    const usage = payload?.output?.usage;
    if (!step || !usage) return;
    // A step that called tools is followed by another (whose check does not wait for this record);
    // any other is the run's last, and its record lands before generate() resolves.
    const last = payload.stepResult?.reason !== 'tool-calls';
    const providerMetadata = payload.providerMetadata ?? payload.metadata?.providerMetadata;
    const stored = this.config.options.awaitRecords === true;
    const ahead = () => {
      if (last || this.config.options.checkAhead === false) return;
      const meaning = { provider: step.providerId, providerMetadata, specVersion: step.specVersion };
      const { outputTokens } = fromAiSdk(usage, meaning).usage;
      this.ahead.send(run, args.stepNumber, outputTokens ?? 0);
    };
    // The next step's check goes out first, unless it must see this record stored.
    if (!stored) ahead();
    await this.records.record(run, step, usage, providerMetadata, last || stored);
    if (last) return this.records.drain(run);
    if (stored) ahead();
  }

  /** Releases the reservation of a step whose LLM call failed (see `processAPIError`). */
  async onAPIError(args: { stepNumber: number }, run: RunState): Promise<void> {
    const step = run.pending.findLast((p) => p.stepIndex === args.stepNumber && !p.recorded);
    if (step?.reservationId && this.client.guard.release) {
      step.recorded = true; // nothing to record: the call produced no usage
      try {
        await this.client.guard.release(step.reservationId);
      } catch (error) {
        this.config.log(
          `Cost guard: could not release the reservation of step ${step.stepIndex}: ${(error as Error)?.message ?? String(error)}`,
        );
      }
    }
    // The run may end here: the steps that ran are stored before the error reaches the caller.
    await this.records.drain(run);
  }

  /** `client.guard.check`, retried while Tollgate answers busy, within `busyDeadlineMs`. */
  private ask(request: GuardCheckRequest): Promise<ServedCheck> {
    return checkUntilServed(this.client, request, this.config.options.busyDeadlineMs ?? 10_000);
  }

  /** Outgoing messages of the step, counted exactly, plus the conversation overhead. */
  private estimateInputTokens(args: Pick<CostGuardStepArgs, 'messageList' | 'messages' | 'systemMessages'>): number {
    const messages = args.messageList?.get.all.db() ?? args.messages ?? [];
    const systemMessages = args.messageList?.getAllSystemMessages() ?? args.systemMessages ?? [];
    let tokens = TOKENS_PER_CONVERSATION;
    for (const system of systemMessages) tokens += this.counter.countSystemMessage(system);
    for (const message of messages) tokens += this.counter.countMessage(message);
    return tokens;
  }
}

/** An answer that stops or shrinks the step (a busy or unreachable guard's is not about the budget). */
function binds(response: GuardCheckResponse): boolean {
  if (response.adjust) return true;
  return response.decision === 'deny' && response.violations.length > 0 && !response.reason;
}
