import { MessageList } from '@mastra/core/agent/message-list';
import { getEncoding } from 'js-tiktoken';
import { TOKENS_PER_CONVERSATION, TOKENS_PER_MESSAGE, TokenLimiterProcessor } from '../src';
import { abort, text } from './support/messages';

/**
 * Lazy counting (newest first, bounds rule messages out, stop once nothing fits) must keep exactly
 * what counting every message exactly keeps. The reference here is js-tiktoken itself and the
 * documented framing, with the plain newest-first walk.
 */
const reference = getEncoding('o200k_base');
const exact = (s: string) => reference.encode(s, [], []).length;
const SYSTEM = 'You are a support agent.';

const WORDS =
  'the invoice for march was paid twice, so we need a refund of 1,250.00 EUR — café naïve 😅 東京 tracking JD0146 status: shipped\n/path/to'.split(
    ' ',
  );
function thread(n: number, seed: number) {
  let s = seed;
  const random = () => ((s = (s * 1_103_515_245 + 12_345) % 2_147_483_648), s / 2_147_483_648);
  return Array.from({ length: n }, (_, i) => {
    // Mostly long messages, some very short ones: best-fit keeps looking for those past the first that does not fit.
    const words = random() < 0.2 ? 1 + Math.floor(random() * 3) : 20 + Math.floor(random() * 200);
    const body = Array.from({ length: words }, () => WORDS[Math.floor(random() * WORDS.length)]).join(
      random() < 0.1 ? '  ' : ' ',
    );
    return text(i % 2 ? 'assistant' : 'user', body, `lazy-${seed}-${i}`);
  });
}

function referenceKept(messages: ReturnType<typeof thread>, limit: number, mode: 'best-fit' | 'contiguous') {
  const systemTokens = TOKENS_PER_MESSAGE + exact('system') + exact(SYSTEM);
  const budget = limit - systemTokens - TOKENS_PER_CONVERSATION;
  const kept: string[] = [];
  let used = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    const tokens = TOKENS_PER_MESSAGE + exact(m.role) + exact((m.content.parts![0] as { text: string }).text);
    if (used + tokens <= budget) {
      kept.unshift(m.id);
      used += tokens;
    } else if (mode === 'contiguous') break;
  }
  return kept;
}

describe('TokenLimiterProcessor lazy counting', () => {
  it.each([
    ['best-fit', 5_000],
    ['best-fit', 20_000],
    ['contiguous', 5_000],
    ['best-fit', 10_000_000],
  ] as const)('keeps exactly what exact counts of every message keep (%s, limit %d)', async (mode, limit) => {
    const history = thread(600, limit + mode.length);
    const expected = referenceKept(history, limit, mode);
    const limiter = new TokenLimiterProcessor({ limit, trimMode: mode });
    const list = new MessageList();
    list.addSystem(SYSTEM);
    list.add(structuredClone(history) as never, 'memory');
    await limiter.processInputStep({ messages: [], messageList: list as never, abort, stepNumber: 0, steps: [] });
    expect(list.get.all.db().map((m) => m.id)).toEqual(expected);
    // The counts it made are exact, and a trimmed thread was not counted whole.
    for (const m of list.get.all.db()) {
      expect(limiter.counter.countMessage(m as never)).toBe(
        TOKENS_PER_MESSAGE + exact(m.role) + exact((m.content.parts[0] as { text: string }).text),
      );
    }
    if (expected.length < history.length / 2) expect(limiter.counter.encodedStrings).toBeLessThan(history.length / 2);
  });

  it('processLLMRequest keeps exactly what exact counts keep, on the provider prompt', async () => {
    const history = thread(400, 99);
    const limit = 8_000;
    const expected = new Set(referenceKept(history, limit, 'best-fit'));
    const prompt = [
      { role: 'system', content: SYSTEM },
      ...history.map((m) => ({
        role: m.role,
        content: [{ type: 'text', text: (m.content.parts![0] as { text: string }).text }],
      })),
    ];
    const limiter = new TokenLimiterProcessor(limit);
    const result = await limiter.processLLMRequest({ prompt, abort, steps: [], state: {} });
    expect(result!.prompt).toEqual([
      prompt[0],
      ...history.flatMap((m, i) => (expected.has(m.id) ? [prompt[i + 1]] : [])),
    ]);
  });
});
