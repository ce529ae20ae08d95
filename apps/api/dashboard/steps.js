// Steps: the step events of the ledger, newest first, paged by cursor, filtered.
import { discovery, steps as stepsApi } from './api.js';
import { escapeHtml, int, timeZone } from './format.js';
import { costCell, latencyCell, modelName, reservationCell, scopeCell, timeCell, tokenCells } from './step-cells.js';

const PAGE_SIZE = 50;

/** The filters the page offers, as the route names them (hash query keys are the same). */
export const STEP_FILTERS = [
  { key: 'model', label: 'Model' },
  { key: 'provider', label: 'Provider' },
  { key: 'entityName', label: 'Agent', list: 'agents' },
  { key: 'resourceId', label: 'Resource' },
  { key: 'userId', label: 'User' },
  { key: 'environment', label: 'Environment', list: 'environments' },
  { key: 'tag', label: 'Tag', list: 'tags' },
];
// Also accepted from links (a scope's "its steps"), shown as a removable chip.
const LINK_FILTERS = ['traceId', 'threadId', 'organizationId', 'sessionId'];

export async function renderSteps(el, { range, query, href }) {
  const filters = {};
  for (const k of [...STEP_FILTERS.map((f) => f.key), ...LINK_FILTERS, 'unpriced'])
    if (query.get(k)) filters[k] = query.get(k);
  const cursor = query.get('cursor') ?? undefined;
  const pageNo = Number(query.get('page') ?? 1) || 1;
  const [page, names, environments, tags] = await Promise.all([
    stepsApi.list({
      ...filters,
      from: range.start.toISOString(),
      to: range.end.toISOString(),
      limit: PAGE_SIZE,
      cursor,
    }),
    discovery('entity-names').catch(() => ({ names: [] })),
    discovery('environments').catch(() => ({ environments: [] })),
    discovery('tags').catch(() => ({ tags: [] })),
  ]);
  const lists = { agents: names.names, environments: environments.environments, tags: tags.tags };
  const withFilters = (extra) => href('steps', undefined, { ...filters, ...extra });

  el.innerHTML = `
    <div class="page-head"><h1>Steps</h1><span class="muted">step events of the ledger, newest first · ${escapeHtml(range.label)} · times in ${escapeHtml(timeZone())}</span></div>
    <form class="panel filters" id="step-filters" data-testid="step-filters">
      ${STEP_FILTERS.map(
        (f) =>
          `<label><span>${f.label}</span><input name="${f.key}" value="${escapeHtml(filters[f.key] ?? '')}" ${f.list ? `list="list-${f.list}"` : ''} autocomplete="off" spellcheck="false"></label>`,
      ).join('')}
      <label><span>Price</span><select name="unpriced"><option value="">all steps</option><option value="true" ${filters.unpriced === 'true' ? 'selected' : ''}>unpriced only</option><option value="false" ${filters.unpriced === 'false' ? 'selected' : ''}>priced only</option></select></label>
      ${Object.entries(lists)
        .map(
          ([id, values]) =>
            `<datalist id="list-${id}">${values.map((v) => `<option value="${escapeHtml(v)}">`).join('')}</datalist>`,
        )
        .join('')}
      <div class="actions"><button type="submit">Filter</button> <a href="${href('steps')}" data-testid="clear-filters">clear</a></div>
      ${LINK_FILTERS.filter((k) => filters[k])
        .map(
          (k) =>
            `<span class="badge chip" data-testid="filter-chip">${escapeHtml(k)} = ${escapeHtml(filters[k])} <a href="${withFilters({ [k]: null })}" aria-label="remove">×</a></span>`,
        )
        .join('')}
    </form>
    <section class="panel" data-testid="steps">
      <header><h2>Page ${int(pageNo)}</h2><span class="muted small">${int(page.steps.length)} step${page.steps.length === 1 ? '' : 's'} · inputs include cached tokens, outputs include reasoning tokens</span></header>
      ${page.steps.length ? stepsTable(page.steps, href) : `<p class="empty-row" data-testid="no-steps">No step ${Object.keys(filters).length ? 'matches these filters' : 'was recorded'} in the ${escapeHtml(range.label)}.</p>`}
      <nav class="pager">${cursor ? `<a href="${withFilters({})}" data-testid="first-page">← newest</a>` : '<span></span>'}${page.nextCursor ? `<a href="${withFilters({ cursor: page.nextCursor, page: pageNo + 1 })}" data-testid="next-page">older →</a>` : ''}</nav>
    </section>`;

  el.querySelector('#step-filters').onsubmit = (e) => {
    e.preventDefault();
    const form = new FormData(e.target);
    const next = {};
    for (const [k, v] of form.entries()) if (String(v).trim()) next[k] = String(v).trim();
    for (const k of LINK_FILTERS) if (filters[k]) next[k] = filters[k];
    location.hash = href('steps', undefined, next);
  };
}

function stepsTable(steps, href) {
  return `<div class="scroll-x"><table class="steps"><thead><tr><th>Time</th><th>Agent · model</th><th>Scope</th><th class="num">Input</th><th class="num">Output</th><th class="num">Cost</th><th class="num">Latency</th><th>Reservation</th></tr></thead><tbody>${steps
    .map(
      (s) => `<tr data-testid="step" data-event-id="${escapeHtml(s.eventId)}">
      ${timeCell(s)}
      <td class="model"><div data-testid="step-agent">${escapeHtml(s.entityName ?? '—')}</div><div data-testid="step-model">${escapeHtml(modelName(s))}</div>${s.environment || s.tags.length ? `<div class="tags">${s.environment ? `<span class="badge env">${escapeHtml(s.environment)}</span>` : ''}${s.tags.map((t) => `<span class="badge">${escapeHtml(t)}</span>`).join('')}</div>` : ''}</td>
      <td class="scopes">${scopeCell(s, href)}</td>
      ${tokenCells(s.usage)}
      ${costCell(s)}
      ${latencyCell(s)}
      ${reservationCell(s)}
    </tr>`,
    )
    .join('')}</tbody></table></div>`;
}
