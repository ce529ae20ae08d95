import type { INestApplicationContext } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import { ProjectsService, Repricer, repriceSchema, type RepriceSummary } from '@tollgate/ledger';
import { problemsOf } from '@tollgate/contracts';
import { MetricsProjector, ROLLUP_PROJECTION } from '@tollgate/metrics';
import { KEY_SCOPES, type KeyScope } from '@tollgate/platform';
import { ProgressBar } from './progress';

export interface CliCommand {
  /** e.g. `keys create` */
  name: string;
  usage: string;
  /** Options parsed with node:util parseArgs. */
  options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }>;
  /** Needs the Nest application context (database, queues). */
  run(ctx: INestApplicationContext, values: Record<string, unknown>, positionals: string[], stderr?: NodeJS.WriteStream): Promise<void>;
}

const print = (value: unknown) => process.stdout.write(JSON.stringify(value, null, 2) + '\n');

function scopesOf(raw: unknown): KeyScope[] {
  const list = String(raw ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const bad = list.filter((s) => !(KEY_SCOPES as readonly string[]).includes(s));
  if (!list.length || bad.length) throw new Error(`--scopes must be a comma-separated list of ${KEY_SCOPES.join(', ')}${bad.length ? ` (unknown: ${bad.join(', ')})` : ''}`);
  return list as KeyScope[];
}

/** The one line a reprice ends with (and all it prints when stderr is not a terminal). */
export function repriceSummaryLine(s: RepriceSummary): string {
  const delta = Object.entries(s.deltaByUnit).map(([unit, d]) => `${d.costMicros >= 0 ? '+' : ''}${d.costMicros} micro-${unit}`);
  return (
    `${s.dryRun ? 'dry run: would reprice' : 'repriced'} ${s.repriced} of ${s.scanned} steps (${s.unchanged} unchanged, ${s.providerReported} provider-reported, ` +
    `${s.newlyPriced} newly priced) in ${s.batches} batches; delta ${delta.length ? delta.join(', ') : '0'}`
  );
}

/** The commands of `npm run tollgate -- …`; features add theirs here. */
export const COMMANDS: CliCommand[] = [
  {
    name: 'projects create',
    usage: 'projects create --name <name> [--id <id>] [--unpriced-policy count_tokens|deny]',
    options: { name: { type: 'string' }, id: { type: 'string' }, 'unpriced-policy': { type: 'string' } },
    async run(ctx, v) {
      if (!v.name) throw new Error('--name is required');
      const policy = (v['unpriced-policy'] as string | undefined) ?? 'deny';
      if (policy !== 'count_tokens' && policy !== 'deny') throw new Error('--unpriced-policy must be count_tokens or deny');
      print(await ctx.get(ProjectsService).createProject({ name: String(v.name), id: v.id as string | undefined, unpricedPolicy: policy }));
    },
  },
  {
    name: 'keys create',
    usage: 'keys create --project <id> --scopes ingest,guard,read,admin [--name <name>]',
    options: { project: { type: 'string' }, scopes: { type: 'string' }, name: { type: 'string' } },
    async run(ctx, v) {
      if (!v.project) throw new Error('--project is required');
      const key = await ctx.get(ProjectsService).createKey(String(v.project), { scopes: scopesOf(v.scopes), name: v.name as string | undefined });
      print(key);
      process.stderr.write('The key is shown once: store it now.\n');
    },
  },
  {
    name: 'keys revoke',
    usage: 'keys revoke --project <id> --key <keyId>',
    options: { project: { type: 'string' }, key: { type: 'string' } },
    async run(ctx, v) {
      if (!v.project || !v.key) throw new Error('--project and --key are required');
      print(await ctx.get(ProjectsService).revokeKey(String(v.project), String(v.key)));
    },
  },
  {
    name: 'keys list',
    usage: 'keys list --project <id>',
    options: { project: { type: 'string' } },
    async run(ctx, v) {
      if (!v.project) throw new Error('--project is required');
      print(await ctx.get(ProjectsService).listKeys(String(v.project)));
    },
  },
  {
    name: 'prices reprice',
    usage: 'prices reprice --project <id> --from <iso> --to <iso> [--provider <p> [--model <m>]] [--dry-run] [--json]   (append-only cost corrections)',
    options: { project: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' }, provider: { type: 'string' }, model: { type: 'string' }, 'dry-run': { type: 'boolean' }, json: { type: 'boolean' } },
    async run(ctx, v, _positionals, stderr: NodeJS.WriteStream = process.stderr) {
      if (!v.project) throw new Error('--project is required');
      // The same validation as POST /v1/prices/reprice, with the CLI's option names.
      const parsed = repriceSchema.safeParse({ from: v.from, to: v.to, provider: v.provider, model: v.model, dryRun: v['dry-run'] === true });
      if (!parsed.success) {
        const [first] = problemsOf(parsed.error);
        throw new Error(`--${first.field === 'dryRun' ? 'dry-run' : first.field} ${first.reason}`);
      }
      const request = { ...parsed.data, from: new Date(parsed.data.from), to: new Date(parsed.data.to) };
      const repricer = ctx.get(Repricer);
      const projectId = String(v.project);
      // A bar on a terminal; otherwise (a log, a pipe) the summary line only.
      const bar = stderr.isTTY ? new ProgressBar(`prices reprice${request.dryRun ? ' (dry run)' : ''}`, stderr) : null;
      const total = bar ? await repricer.countSteps(projectId, request) : 0;
      bar?.update(0, total);
      const summary = await repricer.reprice(projectId, request, { onBatch: (s) => bar?.update(s.scanned, Math.max(total, s.scanned)) });
      bar?.update(summary.scanned, Math.max(total, summary.scanned), true);
      if (v.json) print(summary);
      else process.stdout.write(`${repriceSummaryLine(summary)}\n`);
    },
  },
  {
    name: 'replay',
    usage: `replay ${ROLLUP_PROJECTION} [--batch-size <n>]   (rebuild a projection from position 0; ingest may go on)`,
    options: { 'batch-size': { type: 'string' } },
    async run(ctx, v, positionals) {
      if (positionals[0] !== ROLLUP_PROJECTION) throw new Error(`replay needs a projection name: ${ROLLUP_PROJECTION}`);
      const batchSize = Number(v['batch-size'] ?? 5000);
      if (!Number.isInteger(batchSize) || batchSize < 1) throw new Error('--batch-size must be a positive integer');
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
      print({ projection: ROLLUP_PROJECTION, eventsRead: result.events, batches: result.batches, eventsProjectedSinceReset: final.done });
    },
  },
];
