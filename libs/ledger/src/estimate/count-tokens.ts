import { Tiktoken, type TiktokenBPE } from 'js-tiktoken/lite';

/** Chat framing, as in OpenAI's counting recipe (and the processors' counter): per message, and once per request. */
const TOKENS_PER_MESSAGE = 3;
const TOKENS_PER_CONVERSATION = 3;

let encoder: Tiktoken | undefined;
/** o200k_base is a 2 MB module and ~100 ms to build: loaded on the first count only. */
function o200k(): Tiktoken {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ranks = require('js-tiktoken/ranks/o200k_base') as TiktokenBPE & { default?: TiktokenBPE };
  encoder ??= new Tiktoken(ranks.default ?? ranks);
  return encoder;
}

/** Input tokens of a chat request with o200k (GPT-4o, GPT-5): framing, roles and contents. */
export function countMessageTokens(messages: readonly { role: string; content: string }[]): number {
  const enc = o200k();
  let total = TOKENS_PER_CONVERSATION;
  for (const m of messages) total += TOKENS_PER_MESSAGE + enc.encode(m.role).length + enc.encode(m.content).length;
  return total;
}
