import { Random } from './prng';

export const SCOPES = ['run', 'thread', 'resource', 'user', 'organization', 'session'] as const;
export type Scope = (typeof SCOPES)[number];
export type Window = '1h' | '24h' | '7d';

/** The step context field that carries each scope's id, and the events column that stores it. */
export const SCOPE_FIELD: Record<Scope, { field: keyof Context; column: string }> = {
  run: { field: 'traceId', column: 'trace_id' },
  thread: { field: 'threadId', column: 'thread_id' },
  resource: { field: 'resourceId', column: 'resource_id' },
  user: { field: 'userId', column: 'user_id' },
  organization: { field: 'organizationId', column: 'organization_id' },
  session: { field: 'sessionId', column: 'session_id' },
};

export interface Context {
  traceId: string;
  resourceId: string;
  organizationId: string;
  userId?: string;
  threadId?: string;
  sessionId?: string;
}

export interface Amounts {
  maxCost?: number;
  maxInputTokens?: number;
  maxOutputTokens?: number;
  maxTotalTokens?: number;
}

/**
 * A request budget (scopeId set) is sent by every check whose context carries that id, so every
 * reservation on its scope was decided against it; a policy applies to every id of its scope.
 * Either way the budget binds every reservation on the scope, which is what makes its spend
 * comparable to its limit.
 */
export interface Budget extends Amounts {
  source: 'request' | 'policy';
  name: string;
  scope: Scope;
  scopeId?: string;
  window: Window;
  warnAtPercent?: number;
  alerts?: number[];
}

export interface Model {
  provider: string;
  model: string;
}

export interface AgentSpec {
  index: number;
  name: string;
  context: Context;
  /** The service it talks to first (it moves to another when that one does not answer). */
  home: number;
  models: Model[];
}

export interface World {
  agents: AgentSpec[];
  budgets: Budget[];
}

/** Priced in the catalog; Claude's input is held at its seeded margin (1.35), OpenAI's at 1.0. */
const MODELS: Model[] = [
  { provider: 'openai', model: 'gpt-4o' },
  { provider: 'openai', model: 'gpt-4o-mini' },
  { provider: 'anthropic', model: 'claude-sonnet-4-5' },
];

/**
 * What a settled step uses on average (the mix of models, and actuals mostly below what was
 * held), and how many steps an agent settles a second on a loaded 2-core machine (~0.3 with two
 * CPU hogs beside it, ~2 on a quiet one): the yardstick for budgets. On a faster machine more of
 * them run out early, and the rest of the run races for what releases and lapses free again.
 */
const STEP = { cost: 0.006, inputTokens: 1500, outputTokens: 350 };
const STEPS_PER_AGENT_SECOND = 0.6;
/**
 * A budget shared by agents runs out early at times; one that binds a single agent (a run) or
 * every id of a scope at once (a policy) does not, or it would deny most of the workload.
 */
const SPREAD = { shared: [0.1, 2.5], narrow: [0.4, 3] } satisfies Record<string, [number, number]>;

/**
 * A budget's amounts: what the agents on its scope would spend over the run, times a factor
 * spread over [lo, hi], so that some budgets run out early, most mid-run (where the races
 * are), and some never.
 */
function amounts(r: Random, expectedSteps: number, [lo, hi]: [number, number]): Amounts {
  const size = () => expectedSteps * r.logBetween(lo, hi);
  const out: Amounts = {};
  const kinds = r.int(1, 2);
  for (let i = 0; i < kinds; i++) {
    const kind = r.weighted({ cost: 5, total: 2, input: 1, output: 1 });
    if (kind === 'cost') out.maxCost = Math.max(0.01, Math.round(size() * STEP.cost * 1e4) / 1e4);
    if (kind === 'total')
      out.maxTotalTokens = Math.max(5000, Math.round(size() * (STEP.inputTokens + STEP.outputTokens)));
    if (kind === 'input') out.maxInputTokens = Math.max(4000, Math.round(size() * STEP.inputTokens));
    if (kind === 'output') out.maxOutputTokens = Math.max(1000, Math.round(size() * STEP.outputTokens));
  }
  return out;
}

function budgetExtras(r: Random): Pick<Budget, 'warnAtPercent' | 'alerts'> {
  return {
    ...(r.chance(0.2) ? { warnAtPercent: r.int(50, 90) } : {}),
    ...(r.chance(0.35) ? { alerts: r.pick([[50], [50, 80, 100], [80, 100], [25, 75]]) } : {}),
  };
}

function contexts(r: Random, agents: number): Context[] {
  const orgs = Array.from({ length: r.int(1, 2) }, (_, i) => `org-${i}`);
  const resources = Array.from({ length: r.int(2, 4) }, (_, i) => ({ id: `res-${i}`, org: orgs[i % orgs.length] }));
  const users = Array.from({ length: r.int(2, 3) }, (_, i) => `user-${i}`);
  const threads = Array.from({ length: r.int(2, 4) }, (_, i) => `thread-${i}`);
  const sessions = Array.from({ length: r.int(1, 3) }, (_, i) => `session-${i}`);
  return Array.from({ length: agents }, (_, n) => {
    const resource = r.pick(resources);
    return {
      traceId: `run-${n}`,
      resourceId: resource.id,
      organizationId: resource.org,
      ...(r.chance(0.7) ? { userId: r.pick(users) } : {}),
      ...(r.chance(0.6) ? { threadId: r.pick(threads) } : {}),
      ...(r.chance(0.5) ? { sessionId: r.pick(sessions) } : {}),
    };
  });
}

/** Every scope id some agent carries, by scope. */
export function scopeIds(agents: readonly AgentSpec[]): Map<Scope, string[]> {
  const ids = new Map<Scope, Set<string>>(SCOPES.map((s) => [s, new Set()]));
  for (const a of agents)
    for (const s of SCOPES) {
      const id = a.context[SCOPE_FIELD[s].field];
      if (id) ids.get(s)!.add(id);
    }
  return new Map([...ids].map(([s, set]) => [s, [...set].sort()]));
}

export function makeWorld(seed: number, opts: { agents: number; services: number; seconds: number }): World {
  const r = new Random(seed, 'world');
  const agents: AgentSpec[] = contexts(r, opts.agents).map((context, index) => ({
    index,
    name: `a${String(index).padStart(2, '0')}`,
    context,
    home: index % opts.services,
    models: r.chance(0.5) ? [r.pick(MODELS)] : MODELS,
  }));
  const stepsPerAgent = opts.seconds * STEPS_PER_AGENT_SECOND;
  const carrying = (scope: Scope, id: string) =>
    agents.filter((a) => a.context[SCOPE_FIELD[scope].field] === id).length;
  const budgets: Budget[] = [];
  const ids = scopeIds(agents);
  for (const [scope, scopeIdsOf] of ids)
    for (const scopeId of scopeIdsOf) {
      if (!r.chance(scope === 'run' ? 0.3 : 0.5)) continue;
      const window = scope === 'run' ? '24h' : r.pick<Window>(['1h', '24h', '7d']);
      const expected = carrying(scope, scopeId) * stepsPerAgent;
      const sized = amounts(r, expected, scope === 'run' ? SPREAD.narrow : SPREAD.shared);
      budgets.push({ source: 'request', name: 'request', scope, scopeId, window, ...sized, ...budgetExtras(r) });
    }
  const policies = r.int(1, 3);
  for (let i = 0; i < policies; i++) {
    const scope = r.pick(SCOPES);
    const window = r.pick<Window>(['1h', '24h', '7d']);
    // A policy binds each id of its scope: sized for the agents of an average one.
    const expected = (agents.length / Math.max(1, ids.get(scope)!.length)) * stepsPerAgent;
    const sized = amounts(r, expected, SPREAD.narrow);
    budgets.push({ source: 'policy', name: `sim-${i}`, scope, window, ...sized, ...budgetExtras(r) });
  }
  return { agents, budgets };
}

/** The request limits an agent sends with every check: those of each scope id it carries. */
export function requestLimits(world: World, context: Context): Record<string, unknown>[] {
  return world.budgets
    .filter((b) => b.source === 'request' && context[SCOPE_FIELD[b.scope].field] === b.scopeId)
    .map((b) => limitBody(b));
}

/** A budget as the guard's request limit or policy body takes it. */
export function limitBody(b: Budget): Record<string, unknown> {
  const { maxCost, maxInputTokens, maxOutputTokens, maxTotalTokens, warnAtPercent, alerts } = b;
  return {
    scope: b.scope,
    window: b.window,
    ...(maxCost !== undefined ? { maxCost } : {}),
    ...(maxInputTokens !== undefined ? { maxInputTokens } : {}),
    ...(maxOutputTokens !== undefined ? { maxOutputTokens } : {}),
    ...(maxTotalTokens !== undefined ? { maxTotalTokens } : {}),
    ...(warnAtPercent !== undefined ? { warnAtPercent } : {}),
    ...(alerts !== undefined ? { alerts } : {}),
  };
}

/** Every budget instance: a request budget is one, a policy one per id of its scope some agent carries. */
export function budgetInstances(world: World): { budget: Budget; scopeId: string; scopeKey: string }[] {
  const ids = scopeIds(world.agents);
  return world.budgets.flatMap((budget) =>
    (budget.scopeId ? [budget.scopeId] : (ids.get(budget.scope) ?? [])).map((scopeId) => ({
      budget,
      scopeId,
      scopeKey: `${budget.scope}:${scopeId}`,
    })),
  );
}
