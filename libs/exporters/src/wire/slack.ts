import type { WireEvent } from './wire-event';

/** The alert event types a Slack exporter sends by default. */
export const ALERT_EVENT_TYPES = ['BudgetThresholdCrossed', 'BudgetExhausted'];

/** Slack's limit on blocks per message: a header plus one section per event must fit. */
export const SLACK_MAX_EVENTS = 40;

/** A Slack incoming-webhook message: `text` (notifications, clients without blocks) and Block Kit blocks. */
export interface SlackMessage {
  text: string;
  blocks: Record<string, unknown>[];
}

const fmt = (n: number, unit: string) =>
  unit === 'tokens' ? `${Math.round(n).toLocaleString('en-US')} tokens` : `${Number(n.toPrecision(12))} ${unit}`;

// Slack's mrkdwn treats &, < and > as control characters; everything of ours is escaped.
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** One line naming the scope, the policy, and usage against the limit. */
export function alertLine(e: WireEvent): string {
  const d = (e.data ?? {}) as Record<string, any>;
  const budget = `${d.scopeKey}${d.window ? ` (${d.window})` : ''}`;
  const against =
    `${fmt(Number(d.usage), d.unit)} of ${fmt(Number(d.limit), d.unit)} ${d.limitType === 'cost' ? '' : `(${d.limitType}) `}`.trimEnd();
  if (e.type === 'BudgetExhausted') return `Budget exhausted: ${budget}, ${d.source} denied a step at ${against}`;
  if (e.type === 'BudgetThresholdCrossed') return `Budget at ${d.threshold}%: ${budget}, ${d.source}, ${against}`;
  return `${e.type}: ${e.eventId}`;
}

/**
 * The message for a batch: a header and one section per event (with a link to the scope's page
 * of the dashboard when `dashboardUrl` is set).
 */
export function slackMessage(
  events: readonly WireEvent[],
  opts: { exporter: string; dashboardUrl?: string },
): SlackMessage {
  const lines = events.map(alertLine);
  const link = (e: WireEvent) => {
    const scopeKey = (e.data as Record<string, unknown> | null)?.scopeKey;
    if (!opts.dashboardUrl || typeof scopeKey !== 'string') return '';
    const scope = scopeKey.slice(0, scopeKey.indexOf(':'));
    const url = `${opts.dashboardUrl.replace(/\/$/, '')}/#/scope/${encodeURIComponent(scope)}/${encodeURIComponent(scopeKey.slice(scope.length + 1))}`;
    return ` <${url}|Open in the dashboard>`;
  };
  const text = events.length === 1 ? lines[0] : `${events.length} budget alerts: ${lines.join('; ')}`;
  return {
    text: esc(text),
    blocks: [
      {
        type: 'header',
        text: {
          type: 'plain_text',
          text:
            events.length === 1 ? 'Tollgate budget alert' : `Tollgate: ${events.length} budget alerts`.slice(0, 150),
        },
      },
      ...events.map((e, i) => ({
        type: 'section',
        text: { type: 'mrkdwn', text: `${esc(lines[i])}${link(e)}`.slice(0, 3000) },
      })),
    ],
  };
}
