import { slackMessage } from './slack';
import type { WireEvent } from './wire-event';

const alert = (type: string, data: Record<string, unknown>) =>
  ({ eventId: 'tg:alert:x:1', type, data }) as unknown as WireEvent;

describe('slackMessage', () => {
  it('names scope, window, policy and usage against the limit, money in its unit', () => {
    const m = slackMessage(
      [
        alert('BudgetThresholdCrossed', {
          scopeKey: 'user:u1',
          window: '7d',
          source: 'policy:team',
          limitType: 'cost',
          threshold: 80,
          usage: 8.125,
          limit: 10,
          unit: 'EUR',
        }),
      ],
      { exporter: 's' },
    );
    expect(m.text).toBe('Budget at 80%: user:u1 (7d), policy:team, 8.125 EUR of 10 EUR');
    expect(m.blocks).toEqual([
      { type: 'header', text: { type: 'plain_text', text: 'Tollgate budget alert' } },
      {
        type: 'section',
        text: { type: 'mrkdwn', text: 'Budget at 80%: user:u1 (7d), policy:team, 8.125 EUR of 10 EUR' },
      },
    ]);
  });

  it("escapes Slack's control characters in ids, so an id cannot forge a link or a mention", () => {
    const m = slackMessage(
      [
        alert('BudgetExhausted', {
          scopeKey: 'run:<!channel>&x',
          window: null,
          source: 'request',
          limitType: 'totalTokens',
          usage: 1200,
          limit: 1000,
          unit: 'tokens',
        }),
      ],
      { exporter: 's', dashboardUrl: 'https://t.example/dashboard/' },
    );
    expect(m.blocks[1]).toEqual({
      type: 'section',
      text: {
        type: 'mrkdwn',
        text: 'Budget exhausted: run:&lt;!channel&gt;&amp;x, request denied a step at 1,200 tokens of 1,000 tokens (totalTokens) <https://t.example/dashboard/#/scope/run/%3C!channel%3E%26x|Open in the dashboard>',
      },
    });
  });
});
