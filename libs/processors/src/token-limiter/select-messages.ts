/**
 * Which conversation messages fit a token budget. Pure: no Mastra, no encoder.
 */

/** How messages are dropped when they do not all fit. */
export type TrimMode = 'best-fit' | 'contiguous';

/** One non-system message, oldest first, as the selection sees it. */
export interface Candidate {
  /** Tokens the message costs. */
  tokens: number;
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
  tokens: number;
  protected: boolean;
}

/**
 * Groups messages linked by a tool call id. Mastra usually stores a call and its result in one
 * message, but histories converted from other formats split them, and providers reject a call
 * without its result (and a result without its call).
 */
export function groupByToolCall(candidates: readonly Candidate[]): Group[] {
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
  const groups = new Map<number, Group>();
  candidates.forEach((candidate, i) => {
    const root = find(i);
    let group = groups.get(root);
    if (!group) {
      group = { members: [], newest: i, tokens: 0, protected: false };
      groups.set(root, group);
    }
    group.members.push(i);
    group.newest = Math.max(group.newest, i);
    group.tokens += candidate.tokens;
    group.protected ||= candidate.protected;
  });
  return [...groups.values()].sort((a, b) => b.newest - a.newest);
}

/**
 * Keeps protected messages, then the newest groups that fit in `budget`.
 *
 * `best-fit` skips a group that does not fit and keeps looking at older ones; `contiguous` stops at
 * the first group that does not fit, so what is kept is an unbroken suffix of the conversation.
 */
export function selectMessages(candidates: readonly Candidate[], budget: number, mode: TrimMode): Selection {
  const groups = groupByToolCall(candidates);
  const keep = candidates.map(() => false);
  let protectedTokens = 0;
  for (const group of groups) if (group.protected) protectedTokens += group.tokens;
  if (protectedTokens > budget) return { ok: false, reason: 'protected-exceeds', protectedTokens };

  let used = protectedTokens;
  let kept = 0;
  for (const group of groups) {
    if (group.protected) {
      for (const i of group.members) keep[i] = true;
      kept++;
      continue;
    }
    if (used + group.tokens <= budget) {
      for (const i of group.members) keep[i] = true;
      used += group.tokens;
      kept++;
    } else if (mode === 'contiguous') {
      break;
    }
  }
  if (kept === 0) return { ok: false, reason: 'none-fit', protectedTokens: 0 };
  return { ok: true, keep, keptTokens: used };
}
