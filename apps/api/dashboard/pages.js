// The dashboard's pages, one module each. A page is `render(el, ctx)`: it fills `el` (off-screen)
// and may return a function to run once `el` is in the document (charts need their width).
// Adding a page is one entry here (and its file); `nav: true` puts it in the top bar.
import { renderOverview } from './overview.js';
import { renderSteps } from './steps.js';
import { renderRun } from './run.js';
import { renderLatency } from './latency.js';
import { renderScope } from './scope.js';
import { renderBudgets } from './budgets.js';
import { renderAlerts } from './alerts.js';

export const PAGES = [
  { id: 'overview', label: 'Overview', render: renderOverview, nav: true },
  { id: 'steps', label: 'Steps', render: renderSteps, nav: true },
  { id: 'latency', label: 'Latency', render: renderLatency, nav: true },
  { id: 'scope', label: 'Scopes', render: renderScope, nav: true },
  { id: 'budgets', label: 'Budgets', render: renderBudgets, nav: true },
  { id: 'alerts', label: 'Alerts', render: renderAlerts, nav: true },
  // Opened from a step or a run scope: #/run/<traceId>.
  { id: 'run', label: 'Run', render: renderRun, nav: false, navAs: 'steps' },
];
