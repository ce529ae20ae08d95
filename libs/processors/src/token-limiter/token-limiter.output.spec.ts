import { getEncoding } from 'js-tiktoken';
import { abort, caught, text, uid } from '../../test/support/messages';
import { TokenLimiterProcessor } from './token-limiter.processor';

const enc = getEncoding('o200k_base');
const exact = (s: string) => enc.encode(s, [], []).length;

describe('TokenLimiterProcessor output', () => {
  const delta = (t: string) => ({ type: 'text-delta', payload: { id: '1', text: t } });
  async function run(
    limiter: TokenLimiterProcessor,
    parts: Array<{ type: string; payload?: unknown; object?: unknown }>,
  ) {
    const state: Record<string, unknown> = {};
    const written: unknown[] = [];
    const writer = { custom: async (p: unknown) => void written.push(p) };
    const out = [];
    for (const part of parts) out.push(await limiter.processOutputStream({ part, state, abort, writer }));
    return { out, written };
  }

  it('passes text while under the limit, then withholds the part that crosses it and all text after', async () => {
    // ' one two three' etc: one token per word.
    const { out, written } = await run(new TokenLimiterProcessor(5), [
      delta(' one two'),
      delta(' three four'),
      delta(' five six'),
      delta(' seven'),
    ]);
    expect(out.map((p) => (p ? (p.payload as { text: string }).text : null))).toEqual([
      ' one two',
      ' three four',
      null,
      null,
    ]);
    expect(written).toEqual([
      {
        type: 'data-token-limit-reached',
        data: { processorId: 'token-limiter', limit: 5, tokens: 6 },
        transient: true,
      },
    ]);
  });

  it('with splitChunks, cuts the part that crosses the limit to what fits', async () => {
    const limiter = new TokenLimiterProcessor({ limit: 5, splitChunks: true });
    const { out, written } = await run(limiter, [
      delta(' one two'),
      delta(' three four'),
      delta(' five six'),
      delta(' seven'),
    ]);
    expect(out.map((p) => (p ? (p.payload as { text: string }).text : null))).toEqual([
      ' one two',
      ' three four',
      ' five',
      null,
    ]);
    expect(written).toEqual([
      {
        type: 'data-token-limit-reached',
        data: { processorId: 'token-limiter', limit: 5, tokens: 6 },
        transient: true,
      },
    ]);
  });

  it('with a limit of 0 withholds every counted part', async () => {
    const { out, written } = await run(new TokenLimiterProcessor(0), [
      delta(' one'),
      { type: 'step-start', payload: {} },
      delta(' two'),
    ]);
    expect(out).toEqual([null, { type: 'step-start', payload: {} }, null]);
    expect(written).toEqual([
      {
        type: 'data-token-limit-reached',
        data: { processorId: 'token-limiter', limit: 0, tokens: 1 },
        transient: true,
      },
    ]);
  });

  it('never counts or holds lifecycle, reasoning and tool parts', async () => {
    const lifecycle = [
      { type: 'step-start', payload: {} },
      { type: 'reasoning-delta', payload: { text: 'thinking '.repeat(50) } },
      { type: 'tool-call', payload: { toolCallId: 'x', toolName: 'search', args: { q: 'long '.repeat(50) } } },
      { type: 'tool-result', payload: { toolCallId: 'x', result: 'long '.repeat(50) } },
      { type: 'step-finish', payload: {} },
    ];
    const { out, written } = await run(new TokenLimiterProcessor(3), [
      delta(' one two three'),
      delta(' four'),
      ...lifecycle,
      delta(' five'),
    ]);
    expect(out.slice(2, 7)).toEqual(lifecycle);
    expect(out[1]).toBeNull();
    expect(out[7]).toBeNull();
    expect(written).toHaveLength(1);
  });

  it('counts object parts and withholds them past the limit', async () => {
    const object = { type: 'object', object: { answer: 'a fairly long answer with many words in it' } };
    const { out, written } = await run(new TokenLimiterProcessor(5), [object]);
    expect(out).toEqual([null]);
    expect(written).toEqual([
      {
        type: 'data-token-limit-reached',
        data: { processorId: 'token-limiter', limit: 5, tokens: exact(JSON.stringify(object.object)) },
        transient: true,
      },
    ]);
  });

  it('calls abort past the limit with the abort strategy', async () => {
    const limiter = new TokenLimiterProcessor({ limit: 3, strategy: 'abort' });
    const error = await caught(() => run(limiter, [delta(' one two'), delta(' three four')]));
    expect(error.message).toBe('Token limit of 3 exceeded (current: 4)');
    expect(error.options?.retry).toBe(false);
  });

  it('counts only the current part in part mode', async () => {
    const { out, written } = await run(new TokenLimiterProcessor({ limit: 2, countMode: 'part' }), [
      delta(' one two'),
      delta(' three four'),
      delta(' five six seven'),
      delta(' eight'),
    ]);
    expect(out.map((p) => (p ? (p.payload as { text: string }).text : null))).toEqual([
      ' one two',
      ' three four',
      null,
      ' eight',
    ]);
    expect(written).toEqual([
      {
        type: 'data-token-limit-reached',
        data: { processorId: 'token-limiter', limit: 2, tokens: 3 },
        transient: true,
      },
    ]);
  });

  it('processOutputResult truncates assistant text to the limit across parts, without breaking an emoji', async () => {
    const first = 'Bonjour 👋 à tous';
    const second = ' et voilà 👨‍👩‍👧‍👦 la suite de la réponse';
    const firstTokens = exact(first);
    const limiter = new TokenLimiterProcessor(firstTokens + 4);
    const user = text('user', 'x'.repeat(500));
    const answer = {
      id: uid(),
      role: 'assistant',
      content: { parts: [{ type: 'text', text: first }, { type: 'step-start' }, { type: 'text', text: second }] },
    };
    const [u, a] = await limiter.processOutputResult({ messages: [user, answer], abort });
    expect(u).toBe(user);
    const parts = a!.content.parts as Array<{ type: string; text?: string }>;
    expect(parts[0]!.text).toBe(first);
    expect(parts[1]).toEqual({ type: 'step-start' });
    const cut = parts[2]!.text!;
    expect(second.startsWith(cut)).toBe(true);
    expect(exact(cut)).toBeLessThanOrEqual(4);
    // Four tokens end on the first person of the family emoji; the cut falls back before the whole cluster.
    expect(cut).toBe(' et voilà ');
  });

  it('processOutputResult calls abort past the limit with the abort strategy', async () => {
    const limiter = new TokenLimiterProcessor({ limit: 2, strategy: 'abort' });
    const answer = { id: uid(), role: 'assistant', content: { parts: [{ type: 'text', text: ' one two three' }] } };
    const error = await caught(() => limiter.processOutputResult({ messages: [answer], abort }));
    expect(error.message).toBe('Token limit of 2 exceeded (current: 3)');
  });
});
