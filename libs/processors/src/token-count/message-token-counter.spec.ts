import { getEncoding, type TiktokenBPE } from 'js-tiktoken';
import { text, toolMessage, uid } from '../../test/support/messages';
import { TokenCountCache } from './count-cache';
import {
  DEFAULT_IMAGE_TOKENS,
  MessageTokenCounter,
  TOKENS_PER_MESSAGE,
  TOKENS_PER_TOOL_CALL,
  TOKENS_PER_TOOL_RESULT,
} from './message-token-counter';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const cl100k = require('js-tiktoken/ranks/cl100k_base') as TiktokenBPE;
const reference = getEncoding('o200k_base');
const exact = (s: string) => reference.encode(s, [], []).length;

describe('MessageTokenCounter', () => {
  it('counts a text message as exact o200k tokens of role and text plus the per-message framing', () => {
    const counter = new MessageTokenCounter();
    const body = 'The quick brown fox jumps over the lazy dog, naïvely — 42 times! 🦊';
    expect(counter.countMessage(text('user', body))).toBe(TOKENS_PER_MESSAGE + exact('user') + exact(body));
  });

  it('uses the encoding it is given', () => {
    const body = 'Straße, 東京, and some more words to tell encodings apart.';
    const cl = getEncoding('cl100k_base').encode(body).length;
    expect(exact(body)).not.toBe(cl);
    expect(new MessageTokenCounter({ encoding: cl100k }).countText(body)).toBe(cl);
  });

  it('counts special-token text as plain text instead of throwing', () => {
    expect(new MessageTokenCounter().countText('<|endoftext|>')).toBe(exact('<|endoftext|>'));
  });

  it('counts a tool call by name and JSON arguments, and its result as a separate tool message', () => {
    const counter = new MessageTokenCounter();
    const args = { city: 'Paris', units: 'metric' };
    const result = { temperature: 21.5, sky: 'clear' };
    const call = counter.countMessage(toolMessage('c1', 'getWeather', args));
    const done = counter.countMessage(toolMessage('c2', 'getWeather', args, result));
    const base =
      TOKENS_PER_MESSAGE +
      exact('assistant') +
      TOKENS_PER_TOOL_CALL +
      exact('getWeather') +
      exact(JSON.stringify(args));
    expect(call).toBe(base);
    expect(done).toBe(base + TOKENS_PER_TOOL_RESULT + exact(JSON.stringify(result)));
  });

  it('counts images and files at a fixed estimate, never their base64 text', () => {
    const counter = new MessageTokenCounter({ fileTokens: 1000 });
    const base64 = 'iVBORw0KGgo'.repeat(10_000);
    const message = {
      id: uid(),
      role: 'user',
      content: {
        parts: [
          { type: 'text', text: 'what is this?' },
          { type: 'file', mediaType: 'image/png', data: base64 },
          { type: 'file', mediaType: 'application/pdf', data: base64 },
        ],
      },
    };
    expect(counter.countMessage(message)).toBe(
      TOKENS_PER_MESSAGE + exact('user') + exact('what is this?') + DEFAULT_IMAGE_TOKENS + 1000,
    );
    const screenshot = toolMessage('c3', 'screenshot', {}, { data: base64, mediaType: 'image/jpeg' });
    expect(counter.countMessage(screenshot)).toBe(
      TOKENS_PER_MESSAGE +
        exact('assistant') +
        TOKENS_PER_TOOL_CALL +
        exact('screenshot') +
        exact('{}') +
        TOKENS_PER_TOOL_RESULT +
        DEFAULT_IMAGE_TOKENS,
    );
  });

  it('costs nothing for parts the model never receives', () => {
    const counter = new MessageTokenCounter();
    const message = {
      id: uid(),
      role: 'assistant',
      content: {
        parts: [{ type: 'step-start' }, { type: 'source' }, { type: 'data-progress' }, { type: 'text', text: 'hi' }],
      },
    };
    expect(counter.countMessage(message)).toBe(TOKENS_PER_MESSAGE + exact('assistant') + exact('hi'));
  });

  it('encodes a message once across steps and across runs that reload it as a new object', () => {
    const counter = new MessageTokenCounter();
    const history = Array.from({ length: 200 }, (_, i) =>
      text(i % 2 ? 'assistant' : 'user', `message number ${i} with a little text`),
    );
    const first = history.reduce((sum, m) => sum + counter.countMessage(m), 0);
    const encodedAfterFirstPass = counter.encodedStrings;
    for (let step = 0; step < 20; step++) {
      const reloaded = history.map((m) => structuredClone(m));
      expect(reloaded.reduce((sum, m) => sum + counter.countMessage(m), 0)).toBe(first);
    }
    expect(counter.encodedStrings).toBe(encodedAfterFirstPass);
  });

  it('recounts a message whose content changed under the same id', () => {
    const counter = new MessageTokenCounter();
    const id = uid();
    const call = toolMessage('c9', 'search', { q: 'tollgate' }, undefined, id);
    const before = counter.countMessage(call);
    const withResult = toolMessage('c9', 'search', { q: 'tollgate' }, 'three results', id);
    expect(counter.countMessage(withResult)).toBe(before + TOKENS_PER_TOOL_RESULT + exact('three results'));
    const appended = text('assistant', 'Hello', id);
    (appended.content.parts as Array<{ type: string; text?: string }>).push({ type: 'text', text: ' world, again' });
    expect(counter.countMessage(appended)).toBe(
      TOKENS_PER_MESSAGE + exact('assistant') + exact('Hello') + exact(' world, again'),
    );
  });

  it('recounts a message edited in place under the same id (same length, at its start, middle or end; a call turned into its result)', () => {
    const counter = new MessageTokenCounter();
    const id = uid();
    const body = 'alpha beta gamma delta epsilon zeta eta theta iota kappa';
    const message = text('user', body, id);
    const part = message.content.parts![0] as { text: string };
    counter.countMessage(message);
    for (const edited of [
      'ALPHA' + body.slice(5),
      body.slice(0, 26) + 'XXXXX' + body.slice(31),
      body.slice(0, -5) + 'KAPPA',
      body + ' lambda',
    ]) {
      part.text = edited;
      expect(counter.countMessage(message)).toBe(TOKENS_PER_MESSAGE + exact('user') + exact(edited));
    }
    const call = toolMessage('c1', 'search', { q: 'x' }, undefined, uid());
    const before = counter.countMessage(call);
    const invocation = (call.content.parts![0] as { toolInvocation: Record<string, unknown> }).toolInvocation;
    Object.assign(invocation, { state: 'result', result: 'found it' });
    expect(counter.countMessage(call)).toBe(before + TOKENS_PER_TOOL_RESULT + exact('found it'));
  });

  it('re-encodes every time when the cache is disabled', () => {
    const counter = new MessageTokenCounter({ cache: false });
    const message = text('user', 'same text');
    counter.countMessage(message);
    const once = counter.encodedStrings;
    counter.countMessage(message);
    expect(counter.encodedStrings).toBe(2 * once - 1); // the role's count is memoized separately
  });
});

describe('MessageTokenCounter on provider prompts and bounds', () => {
  it('counts a stored tool invocation and the prompt messages it becomes alike', () => {
    const counter = new MessageTokenCounter();
    const args = { city: 'Paris' };
    const result = { temperature: 21.5, sky: 'clear' };
    const stored = counter.countMessage(toolMessage('c1', 'getWeather', args, result));
    const call = counter.countPromptMessage({
      role: 'assistant',
      content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'getWeather', input: args }],
    });
    const done = counter.countPromptMessage({
      role: 'tool',
      content: [
        { type: 'tool-result', toolCallId: 'c1', toolName: 'getWeather', output: { type: 'json', value: result } },
      ],
    });
    expect(call + done).toBe(stored);
    const body = 'Bonjour à tous, '.repeat(40);
    expect(counter.countPromptMessage({ role: 'user', content: [{ type: 'text', text: body }] })).toBe(
      counter.countMessage(text('user', body)),
    );
    expect(counter.countPromptMessage({ role: 'system', content: 'Be brief.' })).toBe(
      counter.countSystemMessage({ role: 'system', content: 'Be brief.' }),
    );
  });

  it('bounds each message from below without encoding it', () => {
    const counter = new MessageTokenCounter();
    const messages = [
      text('user', 'The quick brown fox, naïvely — 42 times! 🦊'),
      toolMessage('c2', 'search', { q: 'a b c' }, { hits: ['x y', 'z'] }),
      text('assistant', ''),
    ];
    for (const m of messages) expect(counter.minTokens(m)).toBeLessThanOrEqual(counter.countMessage(m));
    expect(counter.minTokens(text('user', 'one two three'))).toBe(TOKENS_PER_MESSAGE + exact('user') + 3);
  });
});

describe('TokenCountCache', () => {
  it('evicts the least recently used entry when full', () => {
    const cache = new TokenCountCache(2);
    cache.set('a', 'v', 1);
    cache.set('b', 'v', 2);
    expect(cache.get('a', 'v')).toBe(1); // a is now the most recent
    cache.set('c', 'v', 3);
    expect(cache.get('b', 'v')).toBeUndefined();
    expect(cache.get('a', 'v')).toBe(1);
    expect(cache.get('c', 'v')).toBe(3);
    expect(cache.size).toBe(2);
  });

  it('misses when the content version differs', () => {
    const cache = new TokenCountCache();
    cache.set('a', 'v1', 10);
    expect(cache.get('a', 'v2')).toBeUndefined();
  });
});
