import { api, ApiError, onLag, session } from './api.js';
import { duration, escapeHtml, int } from './format.js';
import { PAGES } from './pages.js';
import { rangeOf, WINDOWS } from './time.js';

const LAG_NOTICE_MS = 5_000;

const view = document.getElementById('view');
const topbar = document.querySelector('.topbar');
const lagBar = document.getElementById('lag');
let renderId = 0;
let maxLag = { events: 0, ms: 0 };

onLag((lag) => {
  if (lag.ms > maxLag.ms) maxLag = lag;
});

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, qs = ''] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { page: parts[0] || 'overview', params: parts.slice(1), query: new URLSearchParams(qs) };
}

/** A link to a page that keeps the selected range; `extra` adds query parameters (filters, a cursor). */
export function href(path, query = parseHash().query, extra = {}) {
  const q = new URLSearchParams();
  for (const k of ['w', 'from', 'to']) if (query.get(k)) q.set(k, query.get(k));
  for (const [k, v] of Object.entries(extra)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const qs = q.toString();
  return `#/${path}${qs ? `?${qs}` : ''}`;
}

function setQuery(changes) {
  const { page, params, query } = parseHash();
  for (const [k, v] of Object.entries(changes))
    if (v === null) query.delete(k);
    else query.set(k, v);
  location.hash = `#/${[page, ...params].map(encodeURIComponent).join('/')}?${query}`;
}

function renderRangePicker(range) {
  const box = document.getElementById('windows');
  box.replaceChildren(
    ...[...Object.keys(WINDOWS), 'custom'].map((w) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = w === 'custom' ? 'Custom' : w;
      b.dataset.window = w;
      b.setAttribute('aria-pressed', String(range.key === w));
      b.onclick = () => {
        if (w === 'custom') {
          document.getElementById('custom').hidden = false;
          return;
        }
        setQuery({ w, from: null, to: null });
      };
      return b;
    }),
  );
  const custom = document.getElementById('custom');
  custom.hidden = range.key !== 'custom';
  const local = (d) => new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
  document.getElementById('custom-start').value = local(range.start);
  document.getElementById('custom-end').value = local(range.end);
  custom.onsubmit = (e) => {
    e.preventDefault();
    // datetime-local values are in the viewer's zone; Date parses them so.
    const from = new Date(document.getElementById('custom-start').value);
    const to = new Date(document.getElementById('custom-end').value);
    if (!(to > from)) return;
    setQuery({ w: null, from: from.toISOString(), to: to.toISOString() });
  };
}

function renderNav() {
  const nav = document.querySelector('.nav');
  if (nav.childElementCount) return;
  nav.replaceChildren(
    ...PAGES.filter((p) => p.nav).map((p) => {
      const a = document.createElement('a');
      a.dataset.page = p.id;
      a.textContent = p.label;
      return a;
    }),
  );
}

function showLag() {
  if (maxLag.ms > LAG_NOTICE_MS) {
    lagBar.hidden = false;
    lagBar.dataset.testid = 'lag';
    lagBar.textContent = `The dashboard projection is ${duration(maxLag.ms)} behind the event log (${int(maxLag.events)} events not yet rolled up). Figures stay exact: the route reads those events from the log.`;
  } else {
    lagBar.hidden = true;
  }
}

async function route() {
  if (!session.key) return showSignIn();
  topbar.hidden = false;
  const { page, params, query } = parseHash();
  const range = rangeOf(query);
  renderRangePicker(range);
  renderNav();
  for (const a of document.querySelectorAll('.nav a')) {
    a.classList.toggle('active', a.dataset.page === (PAGES.find((p) => p.id === page)?.navAs ?? page));
    a.setAttribute('href', href(a.dataset.page, query));
  }
  const id = ++renderId;
  maxLag = { events: 0, ms: 0 };
  const ctx = { range, params, query, href, isCurrent: () => id === renderId };
  view.innerHTML = '<p class="loading">Loading…</p>';
  view.dataset.state = 'loading';
  try {
    const render = (PAGES.find((p) => p.id === page) ?? PAGES[0]).render;
    const content = document.createElement('div');
    content.className = 'grid';
    content.dataset.page = page;
    // The exact range the page asked for (tests and curious users can repeat the queries).
    content.dataset.start = range.start.toISOString();
    content.dataset.end = range.end.toISOString();
    // Rendered off-screen first, then swapped in whole, so a stale render never mixes with a new one.
    const finish = await render(content, ctx);
    if (!ctx.isCurrent()) return;
    view.replaceChildren(content);
    finish?.();
    showLag();
    view.dataset.hash = location.hash;
    view.dataset.state = 'ready';
  } catch (err) {
    if (!ctx.isCurrent()) return;
    if (err instanceof ApiError && err.status === 401) {
      session.key = null;
      return showSignIn('That key is no longer valid. Sign in again.');
    }
    view.innerHTML = `<section class="panel empty"><h2>Could not load this page</h2><p>${escapeHtml(err.message)}</p></section>`;
    view.dataset.state = 'error';
  }
}

function showSignIn(message = '') {
  topbar.hidden = true;
  lagBar.hidden = true;
  view.replaceChildren(document.getElementById('sign-in').content.cloneNode(true));
  view.dataset.state = 'sign-in';
  const error = document.getElementById('sign-in-error');
  error.textContent = message;
  document.getElementById('sign-in-form').onsubmit = async (e) => {
    e.preventDefault();
    const key = document.getElementById('key').value.trim();
    try {
      // Any read route proves the key; the policies list is the smallest.
      await api('GET', '/v1/policies', undefined, key);
      session.key = key;
      route();
    } catch (err) {
      error.textContent =
        err instanceof ApiError && err.status === 401
          ? 'That key is not valid.'
          : err instanceof ApiError && err.status === 403
            ? 'That key does not have the read scope.'
            : `Could not sign in: ${err.message}`;
    }
  };
  document.getElementById('key').focus();
}

document.getElementById('sign-out').onclick = () => {
  session.key = null;
  showSignIn();
};
window.addEventListener('hashchange', route);
route();
