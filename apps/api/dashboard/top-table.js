// A "top N" table of breakdown groups, sortable by name, tokens or cost (cost by default).
import { escapeHtml, int, money, unpriced } from './format.js';

export const TOP = 8;

const COLUMNS = [
  { key: 'name', label: 'Name', num: false },
  { key: 'tokens', label: 'Tokens', num: true },
  { key: 'cost', label: 'Cost', num: true },
];

/**
 * Groups in the order a column sorts them. Cost: highest first, a group with no price after every
 * priced one (by its tokens), ties by tokens; tokens: highest first; name: A→Z.
 */
export function sortGroups(groups, name, by, dir = by === 'name' ? 'asc' : 'desc') {
  const sign = dir === 'asc' ? 1 : -1;
  const cost = (g) => (g.estimatedCost === null || g.estimatedCost === undefined ? -Infinity : g.estimatedCost);
  const cmp = {
    name: (a, b) => name(a.dimensions).localeCompare(name(b.dimensions)),
    tokens: (a, b) => a.value - b.value,
    cost: (a, b) => (cost(a) === cost(b) ? a.value - b.value : cost(a) < cost(b) ? -1 : 1),
  }[by];
  return [...groups].sort((a, b) => sign * cmp(a, b) || name(a.dimensions).localeCompare(name(b.dimensions)));
}

/** The table's HTML; `mount(el)` (after it is in the page) makes its headers sort it. */
export function topTable(id, title, groups, { name, link, fallbackUnit }) {
  const state = { by: 'cost', dir: 'desc' };
  const body = () => {
    const shown = sortGroups(groups, name, state.by, state.dir).slice(0, TOP);
    const max = Math.max(...shown.map((g) => g.value), 1);
    return (
      shown
        .map((g) => {
          const label = name(g.dimensions);
          const url = link?.(g.dimensions);
          return `<tr data-testid="${id}-row" data-key="${escapeHtml(label)}" data-tokens="${g.value}" data-cost="${g.estimatedCost ?? ''}" data-unpriced-steps="${g.unpricedSteps ?? 0}" data-unpriced-tokens="${g.unpricedTokens ?? 0}">
        <td class="name" title="${escapeHtml(label)}">${url ? `<a href="${url}">${escapeHtml(label)}</a>` : escapeHtml(label)}<span class="share"><span style="width:${((g.value / max) * 100).toFixed(1)}%"></span></span></td>
        <td class="num tokens">${int(g.value)}</td>
        <td class="num cost"><span class="amount">${money(g.estimatedCost, g.costUnit ?? (g.estimatedCost === null ? fallbackUnit : null))}</span>${unpriced(g)}</td>
      </tr>`;
        })
        .join('') || '<tr><td colspan="3" class="empty-row">Nothing in this window.</td></tr>'
    );
  };
  const head = () =>
    COLUMNS.map(
      (c) =>
        `<th class="${c.num ? 'num' : ''}" aria-sort="${state.by === c.key ? (state.dir === 'asc' ? 'ascending' : 'descending') : 'none'}"><button type="button" class="sort" data-sort="${c.key}">${c.label}${state.by === c.key ? (state.dir === 'asc' ? ' ▲' : ' ▼') : ''}</button></th>`,
    ).join('');
  const caption = () => `by ${state.by}${groups.length > TOP ? ` · top ${TOP} of ${int(groups.length)}` : ''}`;
  const html = `<section class="panel top" data-testid="${id}" data-sort="${state.by}"><header><h2>${escapeHtml(title)}</h2><span class="muted small" data-testid="${id}-caption">${caption()}</span></header>
    <table><thead><tr>${head()}</tr></thead><tbody>${body()}</tbody></table></section>`;
  const mount = (root) => {
    const section = root.querySelector(`[data-testid="${id}"]`);
    section.addEventListener('click', (e) => {
      const button = e.target.closest('button.sort');
      if (!button) return;
      const by = button.dataset.sort;
      state.dir = state.by === by ? (state.dir === 'asc' ? 'desc' : 'asc') : by === 'name' ? 'asc' : 'desc';
      state.by = by;
      section.dataset.sort = by;
      section.dataset.dir = state.dir;
      section.querySelector('thead tr').innerHTML = head();
      section.querySelector('tbody').innerHTML = body();
      section.querySelector(`[data-testid="${id}-caption"]`).textContent = caption();
    });
  };
  return { html, mount };
}
