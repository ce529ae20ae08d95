/**
 * Which conversation messages fit a token budget. Pure: no Mastra, no encoder.
 */

/** How messages are dropped when they do not all fit. */
export type TrimMode = 'best-fit' | 'contiguous';

/** One non-system message, oldest first, as the selection sees it. */
export interface Candidate {
  /**
   * Tokens the message costs, or a function that counts them. A function is called at most once,
   * and only for messages whose cost the selection needs: those it keeps, and those it cannot
   * rule out by `minTokens`.
   */
  tokens: number | (() => number);
  /** A cheap lower bound of `tokens` (or a function giving it), enough to rule a message out without counting it. Default 0. */
  minTokens?: number | (() => number);
  /** Tool call ids the message carries (calls or results). Messages sharing one are kept or dropped together. */
  toolCallIds: readonly string[];
  /** Must be kept: this run's tool traffic. Dropping it makes the model repeat the same calls forever. */
  protected: boolean;
}

/** Outcome of {@link selectMessages}. */
export type Selection =
  | { ok: true; keep: boolean[]; keptTokens: number }
  | { ok: false; reason: 'none-fit'; protectedTokens: 0 }
  | { ok: false; reason: 'protected-exceeds'; protectedTokens: number };

interface Group {
  members: number[];
  newest: number;
  protected: boolean;
}

/**
 * Groups messages linked by a tool call id. Mastra usually stores a call and its result in one
 * message, but histories converted from other formats split them, and providers reject a call
 * without its result (and a result without its call).
 */
export function groupByToolCall(candidates: readonly Pick<Candidate, 'toolCallIds' | 'protected'>[]): Group[] {
  const n = candidates.length;
  // Most messages carry no tool call: they are groups of one, and need no union-find.
  let linked = false;
  for (let i = 0; i < n && !linked; i++) linked = candidates[i]!.toolCallIds.length > 0;
  if (!linked) {
    const singles: Group[] = new Array(n);
    for (let i = n - 1; i >= 0; i--)
      singles[n - 1 - i] = { members: [i], newest: i, protected: candidates[i]!.protected };
    return singles;
  }
  const parent = candidates.map((_, i) => i);
  const find = (i: number): number => {
    while (parent[i] !== i) {
      parent[i] = parent[parent[i]!]!;
      i = parent[i]!;
    }
    return i;
  };
  const owner = new Map<string, number>();
  candidates.forEach((candidate, i) => {
    for (const id of candidate.toolCallIds) {
      const first = owner.get(id);
      if (first === undefined) owner.set(id, i);
      else parent[find(i)] = find(first);
    }
  });
  // Newest first without sorting: walking down from the newest message, a group appears at its newest member.
  const groups = new Map<number, Group>();
  const ordered: Group[] = [];
  for (let i = n - 1; i >= 0; i--) {
    const candidate = candidates[i]!;
    if (candidate.toolCallIds.length === 0) {
      ordered.push({ members: [i], newest: i, protected: candidate.protected });
      continue;
    }
    const root = find(i);
    let group = groups.get(root);
    if (!group) {
      group = { members: [], newest: i, protected: false };
      groups.set(root, group);
      ordered.push(group);
    }
    group.members.unshift(i);
    group.protected ||= candidate.protected;
  }
  return ordered;
}

/** Options of {@link selectMessages}. */
export interface SelectOptions {
  /** The least any message can cost. Once less than this is left, no older message is looked at. Default 1. */
  floor?: number;
}

/**
 * Keeps protected messages, then the newest groups that fit in `budget`.
 *
 * `best-fit` skips a group that does not fit and keeps looking at older ones; `contiguous` stops at
 * the first group that does not fit, so what is kept is an unbroken suffix of the conversation
 * (protected messages are kept in both modes). Counting is lazy: newest first, a group is
 * counted only when its lower bound fits, and the walk ends once less than `floor` is left, so a
 * long history that does not fit costs about what is kept.
 */
export function selectMessages(
  candidates: readonly Candidate[],
  budget: number,
  mode: TrimMode,
  options: SelectOptions = {},
): Selection {
  const floor = Math.max(options.floor ?? 1, Number.MIN_VALUE);
  const counted = new Map<number, number>();
  const exact = (i: number): number => {
    const tokens = candidates[i]!.tokens;
    if (typeof tokens === 'number') return tokens;
    let n = counted.get(i);
    if (n === undefined) {
      n = tokens();
      counted.set(i, n);
    }
    return n;
  };
  const bounds = new Map<number, number>();
  const lower = (i: number): number => {
    const { tokens, minTokens } = candidates[i]!;
    if (typeof tokens === 'number') return tokens;
    const n = counted.get(i);
    if (n !== undefined) return n;
    if (typeof minTokens !== 'function') return minTokens ?? 0;
    let bound = bounds.get(i);
    if (bound === undefined) {
      bound = minTokens();
      bounds.set(i, bound);
    }
    return bound;
  };
  const sum = (group: Group, f: (i: number) => number) => {
    let total = 0;
    for (const i of group.members) total += f(i);
    return total;
  };

  const groups = groupByToolCall(candidates);
  const keep = candidates.map(() => false);
  let protectedTokens = 0;
  for (const group of groups) if (group.protected) protectedTokens += sum(group, exact);
  if (protectedTokens > budget) return { ok: false, reason: 'protected-exceeds', protectedTokens };

  let used = protectedTokens;
  let kept = 0;
  let open = true;
  for (const group of groups) {
    if (group.protected) {
      for (const i of group.members) keep[i] = true;
      kept++;
      continue;
    }
    if (!open) continue;
    if (budget - used < floor) {
      open = false;
      continue;
    }
    const fits = used + sum(group, lower) <= budget && used + sum(group, exact) <= budget;
    if (fits) {
      for (const i of group.members) keep[i] = true;
      used += sum(group, exact);
      kept++;
    } else if (mode === 'contiguous') {
      open = false;
    }
  }
  if (kept === 0) return { ok: false, reason: 'none-fit', protectedTokens: 0 };
  return { ok: true, keep, keptTokens: used };
}
