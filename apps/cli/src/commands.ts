import type { INestApplicationContext } from '@nestjs/common';
import { guardCheckRequestSchema, idSchema, policySchema, problemsOf } from '@tollgate/contracts';
import { EVENT_SELECT, PrismaService } from '@tollgate/database';
import { ExportersService, putExporterSchema, replaySchema } from '@tollgate/exporters';
import {
  CheckGuard,
  createKeySchema,
  createProjectSchema,
  PoliciesService,
  PricesService,
  ProjectsService,
  projectSettingsSchema,
  putPriceSchema,
  Repricer,
  repriceSchema,
  ScopeUsageReport,
  verifyLedger,
  type LedgerDifference,
  type RepriceSummary,
} from '@tollgate/ledger';
import { MetricsProjector, ROLLUP_PROJECTION } from '@tollgate/usage-metrics';
import { AppError, KEY_SCOPES, type KeyScope } from '@tollgate/platform';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { readFileSync } from 'node:fs';
import type { z } from 'zod';
import { print } from './output';
import { ProgressBar } from './progress';

type Values = Record<string, unknown>;

export interface CliCommand {
  /** e.g. `keys create` */
  name: string;
  usage: string;
  /** Options parsed with node:util parseArgs (`--json` is added to every command). */
  options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }>;
  /** Key and project commands read and write PostgreSQL only: they never wait for Redis. */
  needsRedis?: boolean;
  /** Resolves to the exit code when it is not 0 for a command that did its work (verify found differences). */
  run(
    ctx: INestApplicationContext,
    values: Values,
    positionals: string[],
    stderr?: NodeJS.WriteStream,
  ): Promise<void | number>;
}

/** A mistake in the command line: printed with the command's usage, exit code 2. */
export class UsageError extends Error {}

const json = (v: Values) => v.json === true;

function required(v: Values, ...names: string[]): void {
  const missing = names.filter((n) => v[n] === undefined || v[n] === '');
  if (missing.length)
    throw new UsageError(`${missing.map((n) => `--${n}`).join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required`);
}

function positional(positionals: string[], what: string): string {
  if (!positionals[0]) throw new UsageError(`${what} is required`);
  if (positionals.length > 1) throw new UsageError(`unexpected argument ${positionals[1]}`);
  return positionals[0];
}

/**
 * The same zod schema the route validates with; its first problem in the CLI's words (an option
 * name when the field came from one).
 */
function parse<S extends z.ZodType>(schema: S, input: unknown, optionOf: Record<string, string> = {}): z.infer<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const [first] = problemsOf(parsed.error);
  const option = optionOf[first.field.split('.')[0]];
  throw new UsageError(`${option ? `--${option}` : first.field} ${first.reason}`);
}

function numberOption(v: Values, name: string): number | undefined {
  if (v[name] === undefined) return undefined;
  const n = Number(v[name]);
  if (String(v[name]).trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${name} must be a number`);
  return n;
}

/** A JSON document from `--file <path>` (`-` reads stdin). */
function jsonFile(v: Values): unknown {
  required(v, 'file');
  const path = String(v.file);
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (err) {
    throw new UsageError(`--file ${path}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--file ${path} is not JSON: ${(err as Error).message}`);
  }
}

/** The project a command acts on (`--project`), validated as the API validates ids. */
function projectId(v: Values): string {
  required(v, 'project');
  return parse(idSchema, v.project, { '(root)': 'project', '': 'project' });
}

function scopesOf(raw: unknown): KeyScope[] {
  const list = String(raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = list.filter((s) => !(KEY_SCOPES as readonly string[]).includes(s));
  if (!list.length || bad.length)
    throw new UsageError(
      `--scopes must be a comma-separated list of ${KEY_SCOPES.join(', ')}${bad.length ? ` (unknown: ${bad.join(', ')})` : ''}`,
    );
  return list as KeyScope[];
}

/** The one line a reprice ends with (and all it prints when stderr is not a terminal). */
export function repriceSummaryLine(s: RepriceSummary): string {
  const delta = Object.entries(s.deltaByUnit).map(
    ([unit, d]) => `${d.costMicros >= 0 ? '+' : ''}${d.costMicros} micro-${unit}`,
  );
  return (
    `${s.dryRun ? 'dry run: would reprice' : 'repriced'} ${s.repriced} of ${s.scanned} steps (${s.unchanged} unchanged, ${s.providerReported} provider-reported, ` +
    `${s.newlyPriced} newly priced) in ${s.batches} batches; delta ${delta.length ? delta.join(', ') : '0'}`
  );
}

/** One difference `verify` found, on one line: where, what is stored, what the log gives, and what is wrong. */
export function differenceLine(d: LedgerDifference): string {
  const key = Object.entries(d.key)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return `${d.project}  ${d.table}  ${key}  stored ${JSON.stringify(d.stored)}  expected ${JSON.stringify(d.expected)}  (${d.issue})`;
}

/** An event of the log as `events tail` and `events show` print it. */
export function eventView(r: Record<string, any>) {
  const ids = {
    traceId: r.trace_id,
    threadId: r.thread_id,
    resourceId: r.resource_id,
    userId: r.user_id,
    organizationId: r.organization_id,
    sessionId: r.session_id,
    entityName: r.entity_name,
  };
  const num = (x: unknown) => (x === null || x === undefined ? undefined : Number(x));
  return {
    position: String(r.position),
    eventId: r.event_id,
    type: r.type,
    occurredAt: r.occurred_at.toISOString(),
    recordedAt: r.recorded_at.toISOString(),
    ...Object.fromEntries(Object.entries(ids).filter(([, x]) => x !== null && x !== undefined)),
    ...(r.model ? { provider: r.provider, model: r.model } : {}),
    ...(r.type === 'StepUsageRecorded'
      ? {
          inputTokens: num(r.input_tokens),
          outputTokens: num(r.output_tokens),
          cacheReadTokens: num(r.cache_read_tokens),
          reasoningTokens: num(r.reasoning_tokens),
          cost: r.cost_micros === null ? null : Number(r.cost_micros) / 1e6,
          costUnit: r.cost_unit ?? undefined,
          unpriced: r.unpriced,
          durationMs: num(r.duration_ms),
        }
      : {}),
    ...(r.reservation_id ? { reservationId: r.reservation_id } : {}),
    ...(r.data && Object.keys(r.data).length ? { data: r.data } : {}),
  };
}

/** The commands of `npm run tollgate -- …`: one for each thing the API manages. */
export const COMMANDS: CliCommand[] = [
  // ── projects ────────────────────────────────────────────────────────────────
  {
    name: 'projects create',
    usage: 'projects create --name <name> [--id <id>] [--unpriced-policy deny|count_tokens]',
    options: { name: { type: 'string' }, id: { type: 'string' }, 'unpriced-policy': { type: 'string' } },
    async run(ctx, v) {
      required(v, 'name');
      const body = parse(
        createProjectSchema,
        { name: v.name, id: v.id, unpricedPolicy: v['unpriced-policy'] },
        { name: 'name', id: 'id', unpricedPolicy: 'unpriced-policy' },
      );
      print(await ctx.get(ProjectsService).createProject(body), json(v));
    },
  },
  {
    name: 'projects list',
    usage: 'projects list',
    options: {},
    async run(ctx, v) {
      const rows = await ctx.get(PrismaService).project.findMany({ orderBy: { createdAt: 'asc' } });
      print(
        {
          projects: rows.map((p) => ({
            id: p.id,
            name: p.name,
            costUnit: p.costUnit,
            unpricedPolicy: p.unpricedPolicy,
            createdAt: p.createdAt.toISOString(),
          })),
        },
        json(v),
      );
    },
  },
  {
    name: 'projects settings',
    usage:
      'projects settings --project <id> [--cost-unit USD] [--unpriced-policy deny|fallback|count_tokens] [--fallback-input <per 1M>] [--fallback-output <per 1M>] [--max-event-age-days <n>] [--exchange-rate JPY=0.0067 …]',
    options: {
      project: { type: 'string' },
      'cost-unit': { type: 'string' },
      'unpriced-policy': { type: 'string' },
      'fallback-input': { type: 'string' },
      'fallback-output': { type: 'string' },
      'max-event-age-days': { type: 'string' },
      'exchange-rate': { type: 'string', multiple: true },
    },
    async run(ctx, v) {
      const id = projectId(v);
      const fallbackIn = numberOption(v, 'fallback-input');
      const fallbackOut = numberOption(v, 'fallback-output');
      if ((fallbackIn === undefined) !== (fallbackOut === undefined))
        throw new UsageError('--fallback-input and --fallback-output go together');
      const rates = v['exchange-rate'] as string[] | undefined;
      const exchangeRates = rates?.length
        ? Object.fromEntries(
            rates.map((r) => {
              const [unit, value] = r.split('=');
              if (!unit || value === undefined || !Number.isFinite(Number(value)))
                throw new UsageError(`--exchange-rate ${r} must look like JPY=0.0067`);
              return [unit, Number(value)];
            }),
          )
        : undefined;
      const body = parse(
        projectSettingsSchema,
        {
          costUnit: v['cost-unit'],
          unpricedPolicy: v['unpriced-policy'],
          unpricedFallback:
            fallbackIn === undefined ? undefined : { inputPerMillion: fallbackIn, outputPerMillion: fallbackOut },
          maxEventAgeDays: numberOption(v, 'max-event-age-days'),
          exchangeRates,
        },
        {
          costUnit: 'cost-unit',
          unpricedPolicy: 'unpriced-policy',
          unpricedFallback: 'fallback-input',
          maxEventAgeDays: 'max-event-age-days',
          exchangeRates: 'exchange-rate',
        },
      );
      print(await ctx.get(ProjectsService).updateSettings(id, body), json(v));
    },
  },
  // ── keys ────────────────────────────────────────────────────────────────────
  {
    name: 'keys create',
    usage: 'keys create --project <id> --scopes ingest,guard,read,admin [--name <name>]',
    options: { project: { type: 'string' }, scopes: { type: 'string' }, name: { type: 'string' } },
    async run(ctx, v) {
      const id = projectId(v);
      const body = parse(
        createKeySchema,
        { scopes: scopesOf(v.scopes), name: v.name },
        { scopes: 'scopes', name: 'name' },
      );
      print(await ctx.get(ProjectsService).createKey(id, body), json(v));
      process.stderr.write('The key is shown once: store it now.\n');
    },
  },
  {
    name: 'keys list',
    usage: 'keys list --project <id>',
    options: { project: { type: 'string' } },
    async run(ctx, v) {
      print(await ctx.get(ProjectsService).listKeys(projectId(v)), json(v));
    },
  },
  {
    name: 'keys revoke',
    usage: 'keys revoke --project <id> --key <keyId>',
    options: { project: { type: 'string' }, key: { type: 'string' } },
    async run(ctx, v) {
      required(v, 'key');
      print(await ctx.get(ProjectsService).revokeKey(projectId(v), String(v.key)), json(v));
    },
  },
  // ── policies ────────────────────────────────────────────────────────────────
  {
    name: 'policies put',
    usage:
      'policies put <name> --project <id> --file <policy.json|->   (e.g. {"scope":"resource","window":"24h","maxCost":5})',
    options: { project: { type: 'string' }, file: { type: 'string' } },
    async run(ctx, v, positionals) {
      const id = projectId(v);
      const name = parse(idSchema, positional(positionals, 'a policy name'));
      print(await ctx.get(PoliciesService).put(id, name, parse(policySchema, jsonFile(v))), json(v));
    },
  },
  {
    name: 'policies list',
    usage: 'policies list --project <id>',
    options: { project: { type: 'string' } },
    async run(ctx, v) {
      print({ policies: await ctx.get(PoliciesService).list(projectId(v)) }, json(v));
    },
  },
  {
    name: 'policies delete',
    usage: 'policies delete <name> --project <id>',
    options: { project: { type: 'string' } },
    async run(ctx, v, positionals) {
      const id = projectId(v);
      const name = parse(idSchema, positional(positionals, 'a policy name'));
      await ctx.get(PoliciesService).remove(id, name);
      print({ deleted: name }, json(v));
    },
  },
  // ── prices ──────────────────────────────────────────────────────────────────
  {
    name: 'prices set',
    usage:
      'prices set --project <id> --provider <p> --model <m> --input <per 1M> --output <per 1M> [--cache-read <per 1M>] [--cache-write <per 1M>] [--cache-write-1h <per 1M>] [--currency USD] [--effective-from <iso>]',
    options: {
      project: { type: 'string' },
      provider: { type: 'string' },
      model: { type: 'string' },
      input: { type: 'string' },
      output: { type: 'string' },
      'cache-read': { type: 'string' },
      'cache-write': { type: 'string' },
      'cache-write-1h': { type: 'string' },
      currency: { type: 'string' },
      'effective-from': { type: 'string' },
    },
    async run(ctx, v) {
      const id = projectId(v);
      required(v, 'provider', 'model', 'input', 'output');
      const provider = parse(idSchema, v.provider, { '(root)': 'provider', '': 'provider' });
      const model = parse(idSchema, v.model, { '(root)': 'model', '': 'model' });
      const body = parse(
        putPriceSchema,
        {
          inputPerMillion: numberOption(v, 'input'),
          outputPerMillion: numberOption(v, 'output'),
          cacheReadPerMillion: numberOption(v, 'cache-read'),
          cacheWritePerMillion: numberOption(v, 'cache-write'),
          cacheWrite1hPerMillion: numberOption(v, 'cache-write-1h'),
          currency: v.currency,
          effectiveFrom: v['effective-from'],
        },
        {
          inputPerMillion: 'input',
          outputPerMillion: 'output',
          cacheReadPerMillion: 'cache-read',
          cacheWritePerMillion: 'cache-write',
          cacheWrite1hPerMillion: 'cache-write-1h',
          currency: 'currency',
          effectiveFrom: 'effective-from',
        },
      );
      print(await ctx.get(PricesService).put(id, provider, model, body), json(v));
    },
  },
  {
    name: 'prices list',
    usage: "prices list --project <id>   (the project's overrides; the catalog prices the rest)",
    options: { project: { type: 'string' } },
    async run(ctx, v) {
      print({ prices: await ctx.get(PricesService).list(projectId(v)) }, json(v));
    },
  },
  {
    name: 'prices reprice',
    usage:
      'prices reprice --project <id> --from <iso> --to <iso> [--provider <p> [--model <m>]] [--dry-run]   (append-only cost corrections)',
    options: {
      project: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      provider: { type: 'string' },
      model: { type: 'string' },
      'dry-run': { type: 'boolean' },
    },
    async run(ctx, v, _positionals, stderr: NodeJS.WriteStream = process.stderr) {
      const id = projectId(v);
      // The same validation as POST /v1/prices/reprice, with the CLI's option names.
      const parsed = parse(
        repriceSchema,
        { from: v.from, to: v.to, provider: v.provider, model: v.model, dryRun: v['dry-run'] === true },
        { dryRun: 'dry-run', from: 'from', to: 'to', provider: 'provider', model: 'model' },
      );
      const request = { ...parsed, from: new Date(parsed.from), to: new Date(parsed.to) };
      const repricer = ctx.get(Repricer);
      // A bar on a terminal; otherwise (a log, a pipe) the summary line only.
      const bar = stderr.isTTY ? new ProgressBar(`prices reprice${request.dryRun ? ' (dry run)' : ''}`, stderr) : null;
      const total = bar ? await repricer.countSteps(id, request) : 0;
      bar?.update(0, total);
      const summary = await repricer.reprice(id, request, {
        onBatch: (s) => bar?.update(s.scanned, Math.max(total, s.scanned)),
      });
      bar?.update(summary.scanned, Math.max(total, summary.scanned), true);
      if (json(v)) print(summary, true);
      else process.stdout.write(`${repriceSummaryLine(summary)}\n`);
    },
  },
  // ── exporters ───────────────────────────────────────────────────────────────
  {
    name: 'exporters put',
    usage:
      'exporters put <name> --project <id> --file <exporter.json|->   (webhook needs TOLLGATE_SECRET_KEY; see libs/exporters/README.md)',
    options: { project: { type: 'string' }, file: { type: 'string' } },
    needsRedis: true,
    async run(ctx, v, positionals) {
      const id = projectId(v);
      const name = positional(positionals, 'an exporter name');
      print(await ctx.get(ExportersService).put(id, name, parse(putExporterSchema, jsonFile(v))), json(v));
    },
  },
  {
    name: 'exporters list',
    usage: 'exporters list --project <id>',
    options: { project: { type: 'string' } },
    async run(ctx, v) {
      print(await ctx.get(ExportersService).list(projectId(v)), json(v));
    },
  },
  {
    name: 'exporters status',
    usage: 'exporters status <name> --project <id>   (settings without secrets, status, checkpoint, lag, dead letters)',
    options: { project: { type: 'string' } },
    async run(ctx, v, positionals) {
      print(await ctx.get(ExportersService).get(projectId(v), positional(positionals, 'an exporter name')), json(v));
    },
  },
  {
    name: 'exporters pause',
    usage: 'exporters pause <name> --project <id>',
    options: { project: { type: 'string' } },
    async run(ctx, v, positionals) {
      print(await ctx.get(ExportersService).pause(projectId(v), positional(positionals, 'an exporter name')), json(v));
    },
  },
  {
    name: 'exporters resume',
    usage: 'exporters resume <name> --project <id>',
    options: { project: { type: 'string' } },
    needsRedis: true,
    async run(ctx, v, positionals) {
      print(await ctx.get(ExportersService).resume(projectId(v), positional(positionals, 'an exporter name')), json(v));
    },
  },
  {
    name: 'exporters replay',
    usage:
      'exporters replay <name> --project <id> (--from-position <n> | --from-time <iso>)   (moves the checkpoint back; never forward)',
    options: { project: { type: 'string' }, 'from-position': { type: 'string' }, 'from-time': { type: 'string' } },
    needsRedis: true,
    async run(ctx, v, positionals) {
      const id = projectId(v);
      const name = positional(positionals, 'an exporter name');
      const body = parse(
        replaySchema,
        { fromPosition: numberOption(v, 'from-position'), fromTime: v['from-time'] },
        { fromPosition: 'from-position', fromTime: 'from-time' },
      );
      const from =
        body.fromPosition !== undefined ? { position: BigInt(body.fromPosition) } : { time: new Date(body.fromTime!) };
      print(await ctx.get(ExportersService).replay(id, name, from), json(v));
    },
  },
  {
    name: 'exporters dead-letters',
    usage: 'exporters dead-letters <name> --project <id>',
    options: { project: { type: 'string' } },
    async run(ctx, v, positionals) {
      print(
        await ctx.get(ExportersService).deadLetters(projectId(v), positional(positionals, 'an exporter name')),
        json(v),
      );
    },
  },
  {
    name: 'exporters retry',
    usage: 'exporters retry <name> --project <id> [--batch <xb_…>]   (sends dead-lettered batches again: all, or one)',
    options: { project: { type: 'string' }, batch: { type: 'string' } },
    needsRedis: true,
    async run(ctx, v, positionals) {
      const id = projectId(v);
      const name = positional(positionals, 'an exporter name');
      if (v.batch !== undefined && !/^xb_[0-9a-f]{20}$/.test(String(v.batch)))
        throw new UsageError('--batch must be a batch id (xb_…)');
      print(await ctx.get(ExportersService).retryDeadLetters(id, name, v.batch as string | undefined), json(v));
    },
  },
  {
    name: 'exporters delete',
    usage: 'exporters delete <name> --project <id>',
    options: { project: { type: 'string' } },
    async run(ctx, v, positionals) {
      const name = positional(positionals, 'an exporter name');
      await ctx.get(ExportersService).delete(projectId(v), name);
      print({ deleted: name }, json(v));
    },
  },
  // ── events ──────────────────────────────────────────────────────────────────
  {
    name: 'events tail',
    usage:
      'events tail --project <id> [--limit <n, default 20>] [--type <EventType>] [--follow]   (newest last; --follow prints new ones as they commit)',
    options: {
      project: { type: 'string' },
      limit: { type: 'string' },
      type: { type: 'string' },
      follow: { type: 'boolean', short: 'f' },
    },
    async run(ctx, v) {
      const id = projectId(v);
      const limit = numberOption(v, 'limit') ?? 20;
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
        throw new UsageError('--limit must be an integer from 1 to 1000');
      const prisma = ctx.get(PrismaService);
      const type = v.type === undefined ? undefined : parse(idSchema, v.type, { '(root)': 'type', '': 'type' });
      const filter = type ? 'AND type = $3' : '';
      const params = (after: bigint | null) => [id, after === null ? limit : 1000, ...(type ? [type] : [])];
      const rows = await prisma.$queryRawUnsafe<Record<string, any>[]>(
        `SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1 ${filter} ORDER BY position DESC LIMIT $2`,
        ...params(null),
      );
      const events = rows.reverse().map(eventView);
      const emit = (list: ReturnType<typeof eventView>[]) => {
        if (json(v)) for (const e of list) process.stdout.write(JSON.stringify(e) + '\n');
        else
          for (const e of list)
            process.stdout.write(
              `${e.occurredAt}  ${String(e.position).padStart(8)}  ${e.type}  ${e.eventId}${'model' in e ? `  ${e.provider}/${e.model}` : ''}${'cost' in e ? `  cost ${e.cost ?? 'unpriced'}` : ''}\n`,
            );
      };
      if (!v.follow) {
        if (json(v)) print({ events }, true);
        else emit(events);
        return;
      }
      // Followed: one JSON object per line (so `jq` reads each as it comes), until Ctrl-C.
      emit(events);
      let last = rows.length ? BigInt(rows[0].position) : 0n;
      let stop = false;
      process.once('SIGINT', () => (stop = true));
      while (!stop) {
        await new Promise((r) => setTimeout(r, 1000));
        const next = await prisma.$queryRawUnsafe<Record<string, any>[]>(
          `SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1 AND position > ${last} ${filter} ORDER BY position ASC LIMIT $2`,
          ...params(last),
        );
        if (next.length) last = BigInt(next[next.length - 1].position);
        emit(next.map(eventView));
      }
    },
  },
  {
    name: 'events show',
    usage: 'events show <eventId> --project <id>',
    options: { project: { type: 'string' } },
    async run(ctx, v, positionals) {
      const id = projectId(v);
      const eventId = positional(positionals, 'an event id');
      const [row] = await ctx
        .get(PrismaService)
        .$queryRawUnsafe<Record<string, any>[]>(
          `SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1 AND event_id = $2 LIMIT 1`,
          id,
          eventId,
        );
      if (!row) throw new Error(`No event ${eventId} in project ${id}`);
      print(eventView(row), json(v));
    },
  },
  // ── guard ───────────────────────────────────────────────────────────────────
  {
    name: 'guard check',
    usage:
      'guard check --project <id> --file <check.json|->   (the body of POST /v1/guard/check; add "dryRun": true to reserve nothing)',
    options: { project: { type: 'string' }, file: { type: 'string' } },
    async run(ctx, v) {
      const id = projectId(v);
      const body = parse(guardCheckRequestSchema, jsonFile(v));
      print(await ctx.get(CommandBus).execute(new CheckGuard(id, body)), json(v));
    },
  },
  {
    name: 'guard usage',
    usage: "guard usage --project <id> --scope resource:<id>   (a scope's usage against every stored policy on it)",
    options: { project: { type: 'string' }, scope: { type: 'string' } },
    async run(ctx, v) {
      const id = projectId(v);
      required(v, 'scope');
      if (!/^(run|thread|resource|user|organization|session):.+$/s.test(String(v.scope)))
        throw new UsageError(
          '--scope must look like resource:<id> (run, thread, resource, user, organization or session)',
        );
      print(await ctx.get(QueryBus).execute(new ScopeUsageReport(id, String(v.scope))), json(v));
    },
  },
  // ── invariants ──────────────────────────────────────────────────────────────
  {
    name: 'verify',
    usage:
      "verify [--project <id>]   (recompute the guard's counters, hold totals, holds and reservation statuses from the log; exit 1 on any difference)",
    options: { project: { type: 'string' } },
    async run(ctx, v) {
      const prisma = ctx.get(PrismaService);
      const id = v.project === undefined ? undefined : projectId(v);
      // An unknown project has nothing to differ: without this, a mistyped id would pass.
      if (id !== undefined && !(await prisma.project.findUnique({ where: { id }, select: { id: true } })))
        throw new AppError('not_found', `No project ${id}`, 'projectId');
      const differences = await verifyLedger(prisma.sql, id);
      if (json(v)) print({ differences }, true);
      else
        process.stdout.write(
          differences.length ? `${differences.map(differenceLine).join('\n')}\n` : 'no differences\n',
        );
      return differences.length ? 1 : 0;
    },
  },
  // ── projections ─────────────────────────────────────────────────────────────
  {
    name: 'replay',
    usage: `replay ${ROLLUP_PROJECTION} [--batch-size <n>]   (rebuild a projection from position 0; ingest may go on)`,
    options: { 'batch-size': { type: 'string' } },
    async run(ctx, v, positionals) {
      if (positionals[0] !== ROLLUP_PROJECTION)
        throw new UsageError(`replay needs a projection name: ${ROLLUP_PROJECTION}`);
      const batchSize = Number(v['batch-size'] ?? 5000);
      if (!Number.isInteger(batchSize) || batchSize < 1)
        throw new UsageError('--batch-size must be a positive integer');
      const prisma = ctx.get(PrismaService);
      const projector = new MetricsProjector(prisma);
      // Progress counts what any worker projected since the reset (workers may take batches too);
      // the total is re-read now and then, since ingest goes on.
      const progressOf = async () => {
        const [row] = await prisma.$queryRawUnsafe<{ done: number; total: number }[]>(
          `SELECT (SELECT events_projected FROM projection_checkpoints WHERE name = $1)::float8 AS done, (SELECT count(*) FROM events)::float8 AS total`,
          ROLLUP_PROJECTION,
        );
        return row;
      };
      const bar = new ProgressBar(`replay ${ROLLUP_PROJECTION}`);
      let total = (await progressOf()).total;
      let done = 0;
      let lastTotal = Date.now();
      bar.update(0, total);
      const result = await projector.replay({
        batchSize,
        onBatch: (n) => {
          done += n;
          if (Date.now() - lastTotal > 5000) {
            lastTotal = Date.now();
            void progressOf().then((p) => (total = Math.max(p.total, total)));
          }
          bar.update(done, Math.max(total, done));
        },
      });
      const final = await progressOf();
      bar.update(final.done, Math.max(final.total, final.done), true);
      print(
        {
          projection: ROLLUP_PROJECTION,
          eventsRead: result.events,
          batches: result.batches,
          eventsProjectedSinceReset: final.done,
        },
        true,
      );
    },
  },
];
