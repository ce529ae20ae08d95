import { fieldPath } from '@tollgate/contracts';

/**
 * Malformed requests, generated from one valid request per endpoint: every case changes the valid
 * request in one way (or, in the "combined" category, in two) that the service must refuse.
 */

export type Category =
  | 'wrong-type'
  | 'missing-field'
  | 'unknown-field'
  | 'bad-number'
  | 'nan-infinity'
  | 'huge-string'
  | 'deep-nesting'
  | 'invalid-utf8'
  | 'content-type'
  | 'empty-body'
  | 'duplicate-key'
  | 'timestamp'
  | 'control-chars'
  | 'injection'
  | 'combined';

export interface BadRequest {
  endpoint: string;
  category: Category;
  what: string;
  method: string;
  path: string;
  body?: string | Buffer;
  contentType?: string;
  /** The field the answer must name (the whole field path); undefined when several would do. */
  field?: string;
}

type Path = (string | number)[];
type Json = unknown;

export interface EndpointSpec {
  name: string;
  method: string;
  /** Builds the URL from the path parameters. */
  url: (params: Record<string, string>) => string;
  params: Record<string, string>;
  /** Parameters validated as ids (control characters, length). */
  idParams: string[];
  body: Record<string, Json>;
  /** Paths that must be present (removing one is an error). */
  required: Path[];
  /** Number paths that may be fractional (costs, rates, durations, percentages). */
  reals: Path[];
  /** Leaf paths holding timestamps. */
  timestamps: Path[];
  /** Objects that are free-form string maps (labels): any key with a string value is valid there. */
  records?: Path[];
  /** Leaf string paths whose format is free (any printable id): an injection string there is valid data. */
  freeText: Path[];
}

export const INJECTIONS = [
  "' OR '1'='1",
  "'; DROP TABLE events; --",
  '" OR ""="',
  '1; SELECT pg_sleep(10)--',
  "' UNION SELECT secret_hash FROM api_keys --",
  "admin'--",
  '$.events[*].usage',
  '$..*',
  "$[?(@.projectId != '')]",
  "{{constructor.constructor('return process')()}}",
  '${jndi:ldap://x}',
  "events->>'project_id'",
  "data #>> '{a,b}'",
  '\\x27 OR 1=1',
];

// Every C0 and C1 control character, DEL, and both halves of a surrogate pair alone.
const CONTROL = [...Array.from({ length: 32 }, (_, i) => i), 0x7f, ...Array.from({ length: 32 }, (_, i) => 0x80 + i), 0xd800, 0xdfff].map((c) => String.fromCharCode(c));

const RAW = '__RAW_SENTINEL__';

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

function get(obj: Json, path: Path): Json {
  return path.reduce<Json>((o, k) => (o as Record<string | number, Json>)[k], obj);
}

function set(obj: Json, path: Path, value: Json): void {
  let o = obj as Record<string | number, Json>;
  for (const k of path.slice(0, -1)) {
    if (o[k] === null || typeof o[k] !== 'object') o[k] = typeof k === 'number' ? [] : {};
    o = o[k] as Record<string | number, Json>;
  }
  o[path[path.length - 1]] = value;
}

function remove(obj: Json, path: Path): void {
  const parent = get(obj, path.slice(0, -1)) as Record<string | number, Json>;
  if (Array.isArray(parent)) parent.splice(path[path.length - 1] as number, 1);
  else delete parent[path[path.length - 1]];
}

/** Every path in the valid body, with the kind of value found there. */
function walk(v: Json, path: Path = [], out: { path: Path; kind: string }[] = []): { path: Path; kind: string }[] {
  const kind = v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
  if (path.length) out.push({ path, kind });
  if (kind === 'object') for (const [k, c] of Object.entries(v as object)) walk(c, [...path, k], out);
  if (kind === 'array') (v as Json[]).forEach((c, i) => walk(c, [...path, i], out));
  return out;
}

const same = (a: Path, b: Path) => a.length === b.length && a.every((k, i) => k === b[i]);

const WRONG: Record<string, Json[]> = {
  string: [123, -1, true, false, null, [], {}, ['x'], { value: 'x' }],
  number: ['100', '', true, null, [], {}, [1], { n: 1 }, '1e3'],
  boolean: ['true', 'false', 1, 0, null, [], {}],
  object: ['x', 1, true, null, [], [{}]],
  array: ['x', 1, true, null, {}, { 0: 'x' }],
};

const BAD_NUMBERS: [string, Json][] = [
  ['negative', -1],
  ['very negative', -1e15],
  ['fractional', 0.5],
  ['fractional large', 1234.5678],
  ['huge', 1e20],
  ['2^53+1', 2 ** 53 + 2],
  ['max double', Number.MAX_VALUE],
  ['tiny negative', -Number.MIN_VALUE],
];

const NUMBER_TOKENS = ['NaN', 'Infinity', '-Infinity', '+1', '0x10', '1e400', '.5', '01', '- 1', 'nan'];

const BAD_TIMESTAMPS = [
  '1999-12-31T23:59:59Z',
  '0000-01-01T00:00:00Z',
  '0001-01-01T00:00:00Z',
  '1970-01-01T00:00:00Z',
  '+275760-09-13T00:00:00Z',
  '9999-12-31T23:59:59Z',
  '2026-13-01T00:00:00Z',
  '2026-02-30T00:00:00Z',
  '2026-01-01T25:00:00Z',
  '2026-01-01T00:60:00Z',
  '2026-01-01',
  '2026-01-01T00:00:00',
  'yesterday',
  '',
  '2026-01-01T00:00:00+25:00',
];

const UTF8: [string, number[]][] = [
  ['lone 0xff', [0xff]],
  ['lone continuation', [0x80]],
  ['truncated 2-byte', [0xc3]],
  ['bad continuation', [0xc3, 0x28]],
  ['overlong slash', [0xc0, 0xaf]],
  ['overlong NUL', [0xc0, 0x80]],
  ['surrogate half', [0xed, 0xa0, 0x80]],
  ['truncated 3-byte', [0xe2, 0x82]],
  ['above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
  ['0xfe', [0xfe]],
];

const CONTENT_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'text/html', 'application/octet-stream', 'application/jsonp', 'json', 'application/x-json', 'image/png'];

const EMPTY: [string, string][] = [
  ['empty', ''],
  ['whitespace', '   \n\t '],
  ['null', 'null'],
  ['array', '[]'],
  ['string', '"x"'],
  ['number', '0'],
  ['true', 'true'],
  ['truncated', '{'],
  ['trailing comma', '{"a":1,}'],
  ['single quotes', "{'a':1}"],
  ['comment', '/* c */ {}'],
  ['two documents', '{}{}'],
];

const UNKNOWN_KEYS = ['extra', 'inputTokenz', 'projectId', 'project_id', 'constructor', 'prototype', 'toString', '$where', 'id ', ' id', 'UsAgE', '\u00e9t\u00e9', '__proto', '__proto__x'];

const UNKNOWN_VALUES: Json[] = [1, 'x', null, {}, []];

const MIB = 1024 * 1024;

export function generate(spec: EndpointSpec): BadRequest[] {
  const out: BadRequest[] = [];
  const url = spec.url(spec.params);
  const leaves = walk(spec.body);
  const isRequired = (p: Path) => spec.required.some((r) => same(r, p));
  const emit = (category: Category, what: string, body: Json, field?: string, extra: Partial<BadRequest> = {}) =>
    out.push({ endpoint: spec.name, category, what, method: spec.method, path: url, body: JSON.stringify(body), contentType: 'application/json', field, ...extra });
  const mutate = (fn: (b: Record<string, Json>) => void) => {
    const b = clone(spec.body);
    fn(b);
    return b;
  };
  const rawAt = (path: Path, raw: string): string => {
    const text = JSON.stringify(mutate((b) => set(b, path, RAW)));
    return text.replace(JSON.stringify(RAW), raw);
  };

  for (const { path, kind } of leaves) {
    const f = fieldPath(path);
    // wrong types
    for (const w of WRONG[kind === 'number' ? 'number' : kind] ?? []) {
      if (kind === 'object' && Array.isArray(get(spec.body, path)) !== Array.isArray(w) && false) continue;
      emit('wrong-type', `${f} = ${JSON.stringify(w)}`, mutate((b) => set(b, path, w)), f);
    }
    if (isRequired(path)) emit('missing-field', `without ${f}`, mutate((b) => remove(b, path)), f);
    if (kind === 'number') {
      const real = spec.reals.some((r) => same(r, path));
      for (const [what, n] of BAD_NUMBERS) if (!(real && what.startsWith('fractional'))) emit('bad-number', `${f} ${what}`, mutate((b) => set(b, path, n)), f);
      // 1e400 is valid JSON text that parses to Infinity: refused by the field, not the parser.
      for (const token of NUMBER_TOKENS) out.push({ endpoint: spec.name, category: 'nan-infinity', what: `${f} = ${token} (raw JSON text)`, method: spec.method, path: url, body: rawAt(path, token), contentType: 'application/json', field: token === '1e400' ? f : '(body)' });
    }
    if (kind === 'string') {
      // 1 MiB strings exceed the body limit; 64 KiB ones get past it and must be refused by the field's own limit.
      out.push({ endpoint: spec.name, category: 'huge-string', what: `${f} of 1 MiB`, method: spec.method, path: url, body: JSON.stringify(mutate((b) => set(b, path, 'x'.repeat(MIB)))), contentType: 'application/json', field: '(body)' });
      if (!spec.timestamps.some((t) => same(t, path)) || true) emit('huge-string', `${f} of 64 KiB`, mutate((b) => set(b, path, 'y'.repeat(64 * 1024))), f);
      for (const [what, bytes] of UTF8) {
        const text = JSON.stringify(mutate((b) => set(b, path, `a${RAW}b`)));
        const [before, after] = text.split(RAW);
        out.push({ endpoint: spec.name, category: 'invalid-utf8', what: `${f} with ${what}`, method: spec.method, path: url, body: Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]), contentType: 'application/json', field: '(body)' });
      }
      const isTimestamp = spec.timestamps.some((t) => same(t, path));
      if (!isTimestamp) {
        for (const c of CONTROL) {
          const name = `U+${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
          emit('control-chars', `${f} with ${name} inside`, mutate((b) => set(b, path, `id${c}x`)), f);
          emit('control-chars', `${f} = ${name} alone`, mutate((b) => set(b, path, c)), f);
        }
      }
      const free = spec.freeText.some((t) => same(t, path));
      for (const inj of INJECTIONS) {
        if (free) {
          // The string is valid data in a free-text field; the request is made invalid by an unknown key named by another injection string.
          const key = INJECTIONS[(INJECTIONS.indexOf(inj) + 1) % INJECTIONS.length];
          emit('injection', `${f} = ${inj} with unknown key ${key}`, mutate((b) => {
            set(b, path, inj);
            set(b, [key], 1);
          }), fieldPath([key]));
        } else {
          emit('injection', `${f} = ${inj}`, mutate((b) => set(b, path, inj)), f);
        }
      }
    }
    if (spec.timestamps.some((t) => same(t, path))) for (const ts of BAD_TIMESTAMPS) emit('timestamp', `${f} = ${ts}`, mutate((b) => set(b, path, ts)), f);
    if (kind === 'object') {
      const record = spec.records?.some((r) => same(r, path));
      for (const key of UNKNOWN_KEYS) for (const v of UNKNOWN_VALUES) if (!(record && typeof v === 'string')) emit('unknown-field', `${f}.${key} = ${JSON.stringify(v)}`, mutate((b) => set(b, [...path, key], v)), fieldPath([...path, key]));
      for (const depth of [40, 1000, 100_000]) {
        out.push({ endpoint: spec.name, category: 'deep-nesting', what: `${f} nested ${depth} deep (arrays)`, method: spec.method, path: url, body: rawAt(path, '['.repeat(depth) + ']'.repeat(depth)), contentType: 'application/json' });
        out.push({ endpoint: spec.name, category: 'deep-nesting', what: `${f} nested ${depth} deep (objects)`, method: spec.method, path: url, body: rawAt(path, '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)), contentType: 'application/json' });
      }
    }
  }
  // Root level: unknown keys, nesting, duplicate keys everywhere.
  for (const key of UNKNOWN_KEYS) for (const v of UNKNOWN_VALUES) emit('unknown-field', `root.${key} = ${JSON.stringify(v)}`, mutate((b) => set(b, [key], v)), fieldPath([key]));
  for (const depth of [40, 1000, 100_000]) {
    emit('deep-nesting', `root.extra nested ${depth} deep`, undefined, undefined, { body: JSON.stringify(spec.body).replace(/}$/, `,"extra":${'['.repeat(depth)}${']'.repeat(depth)}}`) });
    out.push({ endpoint: spec.name, category: 'deep-nesting', what: `whole body ${depth} deep`, method: spec.method, path: url, body: '['.repeat(depth) + ']'.repeat(depth), contentType: 'application/json' });
  }
  for (const { path } of [{ path: [] as Path }, ...leaves]) {
    const parent = path.length ? get(spec.body, path.slice(0, -1)) : null;
    if (!path.length || Array.isArray(parent)) continue;
    const f = fieldPath(path);
    const original = JSON.stringify(get(spec.body, path));
    const key = JSON.stringify(path[path.length - 1]);
    const text = JSON.stringify(mutate((b) => set(b, path, RAW)));
    const target = `${key}:${JSON.stringify(RAW)}`;
    out.push({ endpoint: spec.name, category: 'duplicate-key', what: `${f} twice, same value`, method: spec.method, path: url, body: text.replace(target, `${key}:${original},${key}:${original}`), contentType: 'application/json', field: f });
    out.push({ endpoint: spec.name, category: 'duplicate-key', what: `${f} twice, second null`, method: spec.method, path: url, body: text.replace(target, `${key}:${original},${key}:null`), contentType: 'application/json', field: f });
    const escaped = JSON.stringify(String(path[path.length - 1])).replace(/^"(.)/, (_, c: string) => `"\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    out.push({ endpoint: spec.name, category: 'duplicate-key', what: `${f} twice, once \\u-escaped`, method: spec.method, path: url, body: text.replace(target, `${key}:${original},${escaped}:${original}`), contentType: 'application/json', field: f });
  }
  for (const ct of CONTENT_TYPES) out.push({ endpoint: spec.name, category: 'content-type', what: ct, method: spec.method, path: url, body: JSON.stringify(spec.body), contentType: ct, field: 'content-type' });
  out.push({ endpoint: spec.name, category: 'content-type', what: 'no content type', method: spec.method, path: url, body: JSON.stringify(spec.body), contentType: undefined, field: 'content-type' });
  for (const [what, body] of EMPTY) {
    // For the release route an empty JSON object or no body is the valid request.
    out.push({ endpoint: spec.name, category: 'empty-body', what, method: spec.method, path: url, body, contentType: 'application/json' });
  }
  // Path parameters: control characters, length, injection strings (valid as ids, so paired with an unknown body field).
  for (const param of spec.idParams) {
    const withParam = (value: string) => spec.url({ ...spec.params, [param]: encodeURIComponent(value) });
    for (const c of CONTROL) {
      const name = `U+${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
      if (c === '\ud800' || c === '\udfff') continue; // not encodable in a URL
      for (const [where, value] of [['inside', `p${c}q`], ['alone', c], ['at the end', `pq${c}`]] as const) {
        out.push({ endpoint: spec.name, category: 'control-chars', what: `:${param} with ${name} ${where}`, method: spec.method, path: withParam(value), body: JSON.stringify(spec.body), contentType: 'application/json', field: param });
      }
    }
    out.push({ endpoint: spec.name, category: 'huge-string', what: `:${param} of 300 characters`, method: spec.method, path: withParam('p'.repeat(300)), body: JSON.stringify(spec.body), contentType: 'application/json', field: param });
    for (const inj of INJECTIONS) {
      out.push({ endpoint: spec.name, category: 'injection', what: `:${param} = ${inj} with unknown key`, method: spec.method, path: withParam(inj), body: JSON.stringify({ ...spec.body, [inj]: 1 }), contentType: 'application/json' });
    }
  }
  // Top up to at least 1,000 with pairs of single mutations on JSON values (each refused on its own).
  const singles = out.filter((c) => ['wrong-type', 'bad-number', 'control-chars', 'injection', 'timestamp', 'unknown-field', 'missing-field'].includes(c.category) && typeof c.body === 'string' && c.path === url && c.body.length < 100_000);
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const seen = new Set(out.map((c) => String(c.body)));
  for (let i = 0; out.length < 1100 && singles.length > 1 && i < 100_000; i++) {
    const a = singles[Math.floor(rnd() * singles.length)];
    const b = singles[Math.floor(rnd() * singles.length)];
    const merged = mergeMutations(spec.body, JSON.parse(a.body as string), JSON.parse(b.body as string));
    if (seen.has(JSON.stringify(merged))) continue;
    seen.add(JSON.stringify(merged));
    out.push({ endpoint: spec.name, category: 'combined', what: `${a.what} + ${b.what}`, method: spec.method, path: url, body: JSON.stringify(merged), contentType: 'application/json' });
  }
  return out;
}

/** Applies the changes b made to base on top of a (a key b removed is removed, a value b changed is set). */
function mergeMutations(base: Json, a: Json, b: Json): Json {
  const isObj = (v: Json) => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (!isObj(base) || !isObj(a) || !isObj(b)) return JSON.stringify(b) === JSON.stringify(base) ? a : b;
  const out: Record<string, Json> = { ...(a as Record<string, Json>) };
  const bo = b as Record<string, Json>;
  const baseo = base as Record<string, Json>;
  for (const k of new Set([...Object.keys(baseo), ...Object.keys(bo)])) {
    if (!(k in bo)) delete out[k];
    else if (!(k in baseo)) out[k] = bo[k];
    else if (JSON.stringify(bo[k]) !== JSON.stringify(baseo[k])) {
      out[k] = Array.isArray(baseo[k]) && Array.isArray(bo[k]) && Array.isArray(out[k]) && (baseo[k] as Json[]).length === (bo[k] as Json[]).length
        ? (bo[k] as Json[]).map((v, i) => mergeMutations((baseo[k] as Json[])[i], (out[k] as Json[])[i], v))
        : mergeMutations(baseo[k], out[k], bo[k]);
    }
  }
  return out;
}
