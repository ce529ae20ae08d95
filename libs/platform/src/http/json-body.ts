import { TextDecoder } from 'node:util';
import { fieldPath } from '@tollgate/contracts';
import { AppError } from '../errors/app-error';

/** Deeper than any body of ours (a step event is 3 levels below the batch) and far below a stack's limit. */
export const MAX_JSON_DEPTH = 32;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

type Frame = { keys: Set<string> | null; path: PropertyKey[]; index: number };

/**
 * Finds what `JSON.parse` accepts silently but we refuse: a key given twice in one object (the
 * last one would win, so a client and the service could read different values), a `__proto__`
 * or `constructor.prototype` key (prototype poisoning), and nesting deeper than `maxDepth`. Runs
 * on text JSON.parse has accepted, so it only tracks structure. Returns the problem with the
 * field path, or null.
 */
export function findJsonStructureProblem(
  text: string,
  maxDepth = MAX_JSON_DEPTH,
): { field: string; reason: string } | null {
  const stack: Frame[] = [];
  let expectKey = false;
  let pendingKey: string | null = null;
  const childPath = (): PropertyKey[] => {
    const top = stack[stack.length - 1];
    if (!top) return [];
    return top.keys ? [...top.path, pendingKey ?? ''] : [...top.path, top.index];
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let j = i + 1;
      let escaped = false;
      while (j < text.length) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) {
          escaped = true;
          j += 2;
          continue;
        }
        if (d === 0x22) break;
        j++;
      }
      if (expectKey) {
        const raw = text.slice(i + 1, j);
        const key = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : raw;
        const top = stack[stack.length - 1];
        if (top.keys!.has(key)) return { field: fieldPath([...top.path, key]), reason: 'is given twice in one object' };
        // What Fastify's parser refuses as prototype poisoning, named (it only says "not valid JSON").
        if (key === '__proto__')
          return {
            field: fieldPath([...top.path, key]),
            reason: 'is not accepted as a key (it names an object prototype)',
          };
        if (key === 'prototype' && top.path[top.path.length - 1] === 'constructor')
          return {
            field: fieldPath([...top.path, key]),
            reason: 'is not accepted as a key of constructor (it names an object prototype)',
          };
        top.keys!.add(key);
        pendingKey = key;
        expectKey = false;
      }
      i = j;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const path = childPath();
      if (stack.length + 1 > maxDepth)
        return { field: fieldPath(path), reason: `nests deeper than ${maxDepth} levels` };
      stack.push({ keys: c === 0x7b ? new Set() : null, path, index: 0 });
      expectKey = c === 0x7b;
      continue;
    }
    if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectKey = false;
      continue;
    }
    if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      if (top?.keys) expectKey = true;
      else if (top) top.index++;
    }
  }
  return null;
}

type Done = (err: Error | null, body?: unknown) => void;
type DefaultJsonParser = (req: unknown, body: string, done: Done) => void;

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * The body parser for application/json: refuses invalid UTF-8 (instead of turning it into U+FFFD),
 * duplicate keys and deep nesting with a 400 naming the place, then hands the text to Fastify's
 * own parser, which keeps the __proto__ / constructor.prototype poisoning protection (and names
 * the key it refused, which Fastify's error does not).
 */
export function strictJsonParser(defaultParser: DefaultJsonParser) {
  return (req: unknown, body: Buffer, done: Done): void => {
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      done(new AppError('invalid_json', 'Request body is not valid UTF-8', '(body)'));
      return;
    }
    defaultParser(req, text, (err, value) => {
      if (err) {
        // Valid JSON the default parser refused holds a __proto__ or constructor.prototype key: name it.
        const problem = isJson(text) ? findJsonStructureProblem(text) : null;
        done(problem ? new AppError('invalid_json', `${problem.field} ${problem.reason}`, problem.field) : err);
        return;
      }
      const problem = findJsonStructureProblem(text);
      if (problem) {
        done(new AppError('invalid_json', `${problem.field} ${problem.reason}`, problem.field));
        return;
      }
      done(null, value);
    });
  };
}
