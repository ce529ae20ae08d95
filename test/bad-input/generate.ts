import { fieldPath } from '@tollgate/contracts';

/**
 * Malformed requests, generated from one valid request per endpoint: every case changes the valid
 * request in one way (or, in the "combined" category, in two) that the service must refuse — in
 * its JSON body, its path segments or its query string.
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
  | 'prototype-name'
  | 'combined';

export interface BadRequest {
  endpoint: string;
  category: Category;
  what: string;
  method: string;
  path: string;
  body?: string | Buffer;
  contentType?: string;
  /** The field the answer must name (the whole field path), or the fields either of which will do; undefined when any would do. */
  field?: string | string[];
  /**
   * The request may be valid (a prototype member's name or an injection string where any name
   * is data, on a route that stores nothing): a 2xx is fine, and a refusal must still name `field`.
   */
  mayAccept?: boolean;
}

type Path = (string | number)[];
type Json = unknown;

/** A path segment or query parameter of a route. */
export interface ParamSpec {
  in: 'path' | 'query';
  /** The value of the valid request. */
  value: string;
  /**
   * id: a printable id of at most `maxLength` (256) characters, where any such string is data;
   * text: the same for free text (an empty value is valid only with `emptyOk`);
   * format: a fixed format (a regex, an enum or a known name): anything else is refused;
   * int: a whole number, at most `max` when set.
   */
  kind: 'id' | 'text' | 'format' | 'int';
  required?: boolean;
  maxLength?: number;
  max?: number;
  emptyOk?: boolean;
  /** For a composite value such as `resource:<id>`: mutations of the id are tried inside it too. */
  inner?: (id: string) => string;
}

export interface EndpointSpec {
  name: string;
  method: string;
  /** Builds the path (without the query) from the path parameters. */
  url: (params: Record<string, string>) => string;
  /** Path segments and query parameters, by name; the name is the field a refusal must name. */
  params: Record<string, ParamSpec>;
  /** The JSON body of the valid request; undefined for a route that reads none. */
  body?: Record<string, Json>;
  /** The route stores nothing, so a valid-looking mutation may be answered (it must not be a 5xx). */
  readOnly?: boolean;
  /** Unknown query parameters are refused (the route validates its query). */
  strictQuery?: boolean;
  /** A static file route: every refusal is a 404, without a field. */
  static?: boolean;
  /** Paths that must be present (removing one is an error). */
  required?: Path[];
  /** Number paths that may be fractional (costs, rates, durations, percentages). */
  reals?: Path[];
  /** Leaf paths holding timestamps. */
  timestamps?: Path[];
  /** Timestamps bounded to 2000-01-01..9999-12-31 (the default), or any instant PostgreSQL holds ('any': a replay's from-time). */
  timestampRange?: 'bounded' | 'any';
  /** Objects that are free-form string maps (labels): any key with a string value is valid there. */
  records?: Path[];
  /** Leaf string paths whose format is free (any printable id): an injection string or a prototype member's name there is valid data. */
  freeText?: Path[];
  /** Free text with a minimum length (a signing secret): an injection string may be too short there, so either field may be named. */
  minLengthText?: Path[];
  /** HTTP header values: HTAB and obs-text (U+0080..U+00FF) are valid there (RFC 9110, and what fetch sends); other control characters are not. */
  headerValues?: Path[];
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

/** Names of Object.prototype members: looked up in a plain object, they find something. */
export const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];

// Every C0 and C1 control character, DEL, and both halves of a surrogate pair alone.
const CONTROL = [
  ...Array.from({ length: 32 }, (_, i) => i),
  0x7f,
  ...Array.from({ length: 32 }, (_, i) => 0x80 + i),
  0xd800,
  0xdfff,
].map((c) => String.fromCharCode(c));
/**
 * Where a character class ends: every control character is tried on the first string of a
 * request (and its first parameter), these elsewhere — a class that misses one misses an edge.
 */
const CONTROL_EDGES = [0x00, 0x01, 0x09, 0x0a, 0x0d, 0x1b, 0x1f, 0x7f, 0x80, 0x85, 0x9f, 0xd800, 0xdfff].map((c) =>
  String.fromCharCode(c),
);
const isSurrogate = (c: string) => c === '\ud800' || c === '\udfff';
const charName = (c: string) => `U+${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

const RAW = '__RAW_SENTINEL__';

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** Sets an own property, also for `__proto__` (an assignment would set the prototype instead). */
function put(o: Record<string | number, Json>, k: string | number, value: Json): void {
  Object.defineProperty(o, k, { value, enumerable: true, writable: true, configurable: true });
}

function get(obj: Json, path: Path): Json {
  return path.reduce<Json>((o, k) => (o as Record<string | number, Json>)[k], obj);
}

function set(obj: Json, path: Path, value: Json): void {
  let o = obj as Record<string | number, Json>;
  for (const k of path.slice(0, -1)) {
    if (o[k] === null || typeof o[k] !== 'object') put(o, k, typeof k === 'number' ? [] : {});
    o = o[k] as Record<string | number, Json>;
  }
  put(o, path[path.length - 1], value);
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

/** Not an instant with a zone, or one no PostgreSQL timestamptz or JS Date holds: refused everywhere. */
const MALFORMED_TIMESTAMPS = [
  '0000-01-01T00:00:00Z',
  '-000001-01-01T00:00:00Z',
  '+275760-09-13T00:00:00Z',
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
/** Instants outside 2000-01-01..9999-12-31: refused where timestamps are bounded (most of them). */
const OUT_OF_RANGE_TIMESTAMPS = [
  '1999-12-31T23:59:59Z',
  '0001-01-01T00:00:00Z',
  '1970-01-01T00:00:00Z',
  '9999-12-31T23:59:59Z',
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

const CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/xml',
  'text/html',
  'application/octet-stream',
  'application/jsonp',
  'json',
  'application/x-json',
  'image/png',
];

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

const UNKNOWN_KEYS = [
  'extra',
  'inputTokenz',
  'projectId',
  'project_id',
  '$where',
  'id ',
  ' id',
  'UsAgE',
  '\u00e9t\u00e9',
  '__proto',
  '__proto__x',
  'prototype',
  ...PROTOTYPE_NAMES,
];

const UNKNOWN_VALUES: Json[] = [1, 'x', null, {}, []];

const MIB = 1024 * 1024;

/** The body cases of an endpoint (none when it reads no body). */
function generateBody(spec: EndpointSpec, url: string): BadRequest[] {
  const out: BadRequest[] = [];
  if (!spec.body) return out;
  const base = spec.body;
  const has = (list: Path[] | undefined, p: Path) => (list ?? []).some((r) => same(r, p));
  const leaves = walk(base);
  const emit = (
    category: Category,
    what: string,
    body: Json,
    field?: string | string[],
    extra: Partial<BadRequest> = {},
  ) =>
    out.push({
      endpoint: spec.name,
      category,
      what,
      method: spec.method,
      path: url,
      body: JSON.stringify(body),
      contentType: 'application/json',
      field,
      ...extra,
    });
  const mutate = (fn: (b: Record<string, Json>) => void) => {
    const b = clone(base);
    fn(b);
    return b;
  };
  const rawAt = (path: Path, raw: string): string => {
    const text = JSON.stringify(mutate((b) => set(b, path, RAW)));
    return text.replace(JSON.stringify(RAW), raw);
  };
  /**
   * A value that may be valid data (an injection string, a prototype member's name): on a route
   * that stores nothing it is sent as it is; elsewhere an unknown key named `key` makes the
   * request invalid, and the refusal names that key — or, unless the value is known to be valid
   * there, the field itself.
   */
  const maybeValid = (category: Category, what: string, path: Path, value: Json, key: string, knownValid: boolean) => {
    const f = fieldPath(path);
    if (spec.readOnly)
      emit(
        category,
        what,
        mutate((b) => set(b, path, value)),
        f,
        { mayAccept: true },
      );
    else
      emit(
        category,
        `${what} with unknown key ${key}`,
        mutate((b) => {
          set(b, path, value);
          set(b, [key], 1);
        }),
        knownValid ? fieldPath([key]) : [fieldPath([key]), f],
      );
  };
  const badTimestamps =
    spec.timestampRange === 'any' ? MALFORMED_TIMESTAMPS : [...MALFORMED_TIMESTAMPS, ...OUT_OF_RANGE_TIMESTAMPS];
  let controls = CONTROL;

  for (const { path, kind } of leaves) {
    const f = fieldPath(path);
    for (const w of WRONG[kind === 'number' ? 'number' : kind] ?? [])
      emit(
        'wrong-type',
        `${f} = ${JSON.stringify(w)}`,
        mutate((b) => set(b, path, w)),
        f,
      );
    if (has(spec.required, path))
      emit(
        'missing-field',
        `without ${f}`,
        mutate((b) => remove(b, path)),
        f,
      );
    if (kind === 'number') {
      const real = has(spec.reals, path);
      for (const [what, n] of BAD_NUMBERS)
        if (!(real && what.startsWith('fractional')))
          emit(
            'bad-number',
            `${f} ${what}`,
            mutate((b) => set(b, path, n)),
            f,
          );
      // 1e400 is valid JSON text that parses to Infinity: refused by the field, not the parser.
      for (const token of NUMBER_TOKENS)
        out.push({
          endpoint: spec.name,
          category: 'nan-infinity',
          what: `${f} = ${token} (raw JSON text)`,
          method: spec.method,
          path: url,
          body: rawAt(path, token),
          contentType: 'application/json',
          field: token === '1e400' ? f : '(body)',
        });
    }
    const isTimestamp = has(spec.timestamps, path);
    if (kind === 'string') {
      // 1 MiB strings exceed the body limit; 64 KiB ones get past it and must be refused by the field's own limit.
      out.push({
        endpoint: spec.name,
        category: 'huge-string',
        what: `${f} of 1 MiB`,
        method: spec.method,
        path: url,
        body: JSON.stringify(mutate((b) => set(b, path, 'x'.repeat(MIB)))),
        contentType: 'application/json',
        field: '(body)',
      });
      emit(
        'huge-string',
        `${f} of 64 KiB`,
        mutate((b) => set(b, path, 'y'.repeat(64 * 1024))),
        f,
      );
      for (const [what, bytes] of UTF8) {
        const text = JSON.stringify(mutate((b) => set(b, path, `a${RAW}b`)));
        const [before, after] = text.split(RAW);
        out.push({
          endpoint: spec.name,
          category: 'invalid-utf8',
          what: `${f} with ${what}`,
          method: spec.method,
          path: url,
          body: Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]),
          contentType: 'application/json',
          field: '(body)',
        });
      }
      const header = has(spec.headerValues, path);
      if (!isTimestamp) {
        for (const c of controls) {
          if (header && (c === '\t' || (c >= '\u0080' && c <= '\u009f'))) continue;
          emit(
            'control-chars',
            `${f} with ${charName(c)} inside`,
            mutate((b) => set(b, path, `id${c}x`)),
            f,
          );
          emit(
            'control-chars',
            `${f} = ${charName(c)} alone`,
            mutate((b) => set(b, path, c)),
            f,
          );
        }
        controls = CONTROL_EDGES;
      }
      const free = has(spec.freeText, path);
      const minLength = has(spec.minLengthText, path);
      INJECTIONS.forEach((inj, i) => {
        const key = INJECTIONS[(i + 1) % INJECTIONS.length];
        if (free || minLength) maybeValid('injection', `${f} = ${inj}`, path, inj, key, free);
        else
          emit(
            'injection',
            `${f} = ${inj}`,
            mutate((b) => set(b, path, inj)),
            f,
          );
      });
      // A name looked up in a plain object finds a prototype member: it must be data like any other name.
      if (!isTimestamp)
        PROTOTYPE_NAMES.forEach((name, i) =>
          maybeValid('prototype-name', `${f} = ${name}`, path, name, INJECTIONS[i], free),
        );
    }
    if (isTimestamp)
      for (const ts of badTimestamps)
        emit(
          'timestamp',
          `${f} = ${ts}`,
          mutate((b) => set(b, path, ts)),
          f,
        );
    if (kind === 'object') {
      const record = has(spec.records, path);
      for (const key of UNKNOWN_KEYS)
        for (const v of UNKNOWN_VALUES)
          if (!(record && typeof v === 'string' && key !== '__proto__'))
            emit(
              'unknown-field',
              `${f}.${key} = ${JSON.stringify(v)}`,
              mutate((b) => set(b, [...path, key], v)),
              fieldPath([...path, key]),
            );
      if (record) {
        // Keys of a free-form map are names too; __proto__ is refused by the body parser wherever it is.
        const [first] = Object.values(get(base, path) as object) as Json[];
        PROTOTYPE_NAMES.forEach((name, i) => {
          if (name === '__proto__')
            emit(
              'prototype-name',
              `${f} key ${name}`,
              mutate((b) => set(b, [...path, name], first)),
              fieldPath([...path, name]),
            );
          else maybeValid('prototype-name', `${f} key ${name}`, [...path, name], first, INJECTIONS[i], false);
        });
      }
      for (const depth of [40, 1000, 100_000]) {
        out.push({
          endpoint: spec.name,
          category: 'deep-nesting',
          what: `${f} nested ${depth} deep (arrays)`,
          method: spec.method,
          path: url,
          body: rawAt(path, '['.repeat(depth) + ']'.repeat(depth)),
          contentType: 'application/json',
        });
        out.push({
          endpoint: spec.name,
          category: 'deep-nesting',
          what: `${f} nested ${depth} deep (objects)`,
          method: spec.method,
          path: url,
          body: rawAt(path, '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)),
          contentType: 'application/json',
        });
      }
    }
  }
  // Root level: unknown keys, nesting, duplicate keys everywhere.
  for (const key of UNKNOWN_KEYS)
    for (const v of UNKNOWN_VALUES)
      emit(
        'unknown-field',
        `root.${key} = ${JSON.stringify(v)}`,
        mutate((b) => set(b, [key], v)),
        fieldPath([key]),
      );
  for (const depth of [40, 1000, 100_000]) {
    emit('deep-nesting', `root.extra nested ${depth} deep`, undefined, undefined, {
      body: JSON.stringify(base).replace(
        /}$/,
        `${Object.keys(base).length ? ',' : ''}"extra":${'['.repeat(depth)}${']'.repeat(depth)}}`,
      ),
    });
    out.push({
      endpoint: spec.name,
      category: 'deep-nesting',
      what: `whole body ${depth} deep`,
      method: spec.method,
      path: url,
      body: '['.repeat(depth) + ']'.repeat(depth),
      contentType: 'application/json',
    });
  }
  for (const { path } of leaves) {
    const parent = get(base, path.slice(0, -1));
    if (Array.isArray(parent)) continue;
    const f = fieldPath(path);
    const original = JSON.stringify(get(base, path));
    const key = JSON.stringify(path[path.length - 1]);
    const text = JSON.stringify(mutate((b) => set(b, path, RAW)));
    const target = `${key}:${JSON.stringify(RAW)}`;
    out.push({
      endpoint: spec.name,
      category: 'duplicate-key',
      what: `${f} twice, same value`,
      method: spec.method,
      path: url,
      body: text.replace(target, `${key}:${original},${key}:${original}`),
      contentType: 'application/json',
      field: f,
    });
    out.push({
      endpoint: spec.name,
      category: 'duplicate-key',
      what: `${f} twice, second null`,
      method: spec.method,
      path: url,
      body: text.replace(target, `${key}:${original},${key}:null`),
      contentType: 'application/json',
      field: f,
    });
    const escaped = JSON.stringify(String(path[path.length - 1])).replace(
      /^"(.)/,
      (_, c: string) => `"\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
    out.push({
      endpoint: spec.name,
      category: 'duplicate-key',
      what: `${f} twice, once \\u-escaped`,
      method: spec.method,
      path: url,
      body: text.replace(target, `${key}:${original},${escaped}:${original}`),
      contentType: 'application/json',
      field: f,
    });
  }
  for (const ct of CONTENT_TYPES)
    out.push({
      endpoint: spec.name,
      category: 'content-type',
      what: ct,
      method: spec.method,
      path: url,
      body: JSON.stringify(base),
      contentType: ct,
      field: 'content-type',
    });
  out.push({
    endpoint: spec.name,
    category: 'content-type',
    what: 'no content type',
    method: spec.method,
    path: url,
    body: JSON.stringify(base),
    contentType: undefined,
    field: 'content-type',
  });
  for (const [what, body] of EMPTY) {
    // For the release route an empty JSON object or no body is the valid request.
    out.push({
      endpoint: spec.name,
      category: 'empty-body',
      what,
      method: spec.method,
      path: url,
      body,
      contentType: 'application/json',
    });
  }
  return out;
}

/** The path segment and query string cases of an endpoint. */
function generateParams(spec: EndpointSpec): BadRequest[] {
  const out: BadRequest[] = [];
  const values = Object.fromEntries(Object.entries(spec.params).map(([k, p]) => [k, p.value]));
  const body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
  const contentType = spec.body === undefined ? undefined : 'application/json';
  /** The URL with parameters replaced: undefined leaves one out, a list repeats it. */
  const urlWith = (changes: Record<string, string | string[] | undefined>, extraQuery: [string, string][] = []) => {
    const all: Record<string, string | string[] | undefined> = { ...values, ...changes };
    const path = spec.url(
      Object.fromEntries(
        Object.entries(spec.params)
          .filter(([, p]) => p.in === 'path')
          .map(([k]) => [k, encodeURIComponent(all[k] as string)]),
      ),
    );
    const query: string[] = [];
    for (const [k, p] of Object.entries(spec.params)) {
      if (p.in !== 'query' || all[k] === undefined) continue;
      for (const v of ([] as string[]).concat(all[k]!)) query.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
    }
    for (const [k, v] of extraQuery) query.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
    return query.length ? `${path}?${query.join('&')}` : path;
  };
  const emit = (
    category: Category,
    what: string,
    path: string,
    field: string | string[] | undefined,
    extra: Partial<BadRequest> = {},
  ) => {
    // A static route answers every refusal with a 404 and no field.
    out.push({
      endpoint: spec.name,
      category,
      what,
      method: spec.method,
      path,
      body,
      contentType,
      field: spec.static ? undefined : field,
      ...extra,
    });
  };
  /** A value that may be a valid id or name: fine to answer where nothing is stored; else an unknown body key makes it invalid. */
  const maybeValid = (
    category: Category,
    what: string,
    name: string,
    value: string,
    key: string,
    knownValid: boolean,
  ) => {
    if (spec.readOnly || spec.body === undefined || spec.static)
      emit(category, what, urlWith({ [name]: value }), name, { mayAccept: !spec.static });
    else
      out.push({
        endpoint: spec.name,
        category,
        what: `${what} with unknown key ${key}`,
        method: spec.method,
        path: urlWith({ [name]: value }),
        body: JSON.stringify({ ...spec.body, [key]: 1 }),
        contentType,
        field: knownValid ? key : [key, name],
      });
  };

  let controls = CONTROL;
  for (const [name, p] of Object.entries(spec.params)) {
    const where = p.in === 'path' ? `:${name}` : `?${name}`;
    // The value itself, and for a composite value (scope:id) the id inside it.
    const shapes: [string, (v: string) => string, ParamSpec['kind']][] = [['', (v) => v, p.kind]];
    if (p.inner) shapes.push([' (its id)', p.inner, 'id']);
    if (p.in === 'query') {
      if (p.required) emit('missing-field', `without ${where}`, urlWith({ [name]: undefined }), name);
      emit('wrong-type', `${where} given twice`, urlWith({ [name]: [p.value, p.value] }), name);
    }
    for (const [part, shape, kind] of shapes) {
      if (kind === 'int') {
        for (const v of [
          '',
          'abc',
          '-1',
          '0',
          '0.5',
          '1e400',
          'NaN',
          'Infinity',
          '-Infinity',
          '9'.repeat(400),
          ...(p.max === undefined ? [] : [String(p.max + 1)]),
        ])
          emit('bad-number', `${where} = ${v.slice(0, 20)}`, urlWith({ [name]: shape(v) }), name);
        continue;
      }
      for (const c of controls) {
        // A lone surrogate has no UTF-8 form to percent-encode; its invalid bytes stay undecoded text in a query string.
        if (isSurrogate(c)) continue;
        for (const [at, v] of [
          ['inside', `p${c}q`],
          ['alone', c],
          ['at the end', `pq${c}`],
        ] as const)
          emit('control-chars', `${where}${part} with ${charName(c)} ${at}`, urlWith({ [name]: shape(v) }), name);
      }
      controls = CONTROL_EDGES;
      const maxLength = kind === p.kind ? (p.maxLength ?? 256) : 256;
      emit(
        'huge-string',
        `${where}${part} of ${maxLength + 1} characters`,
        urlWith({ [name]: shape('p'.repeat(maxLength + 1)) }),
        name,
      );
      if (p.in === 'query')
        emit('huge-string', `${where}${part} of 10 KiB`, urlWith({ [name]: shape('p'.repeat(10 * 1024)) }), name);
      if (p.in === 'query' && !(kind === 'text' && p.emptyOk) && part === '')
        emit('missing-field', `${where} empty`, urlWith({ [name]: '' }), name);
      INJECTIONS.forEach((inj, i) => {
        if (kind === 'format') emit('injection', `${where}${part} = ${inj}`, urlWith({ [name]: shape(inj) }), name);
        else
          maybeValid(
            'injection',
            `${where}${part} = ${inj}`,
            name,
            shape(inj),
            INJECTIONS[(i + 1) % INJECTIONS.length],
            true,
          );
      });
      // A prototype member's name may even fit a format (an exporter may be called "constructor").
      PROTOTYPE_NAMES.forEach((proto, i) =>
        maybeValid(
          'prototype-name',
          `${where}${part} = ${proto}`,
          name,
          shape(proto),
          INJECTIONS[i],
          kind !== 'format',
        ),
      );
    }
    if (spec.static)
      for (const v of ['../package.json', '..%2Fpackage.json', '.', '..', 'index.html/', '%2e%2e%2fpackage.json'])
        emit('injection', `${where} = ${v}`, urlWith({ [name]: v }), name);
  }
  if (spec.strictQuery) {
    for (const key of UNKNOWN_KEYS) emit('unknown-field', `?${key}=x`, urlWith({}, [[key, 'x']]), key);
    emit('control-chars', '?a%00b=x (NUL in a key)', urlWith({}, [['a\u0000b', 'x']]), 'a\u0000b');
  }
  return out;
}

export function generate(spec: EndpointSpec): BadRequest[] {
  const url = spec.url(
    Object.fromEntries(
      Object.entries(spec.params)
        .filter(([, p]) => p.in === 'path')
        .map(([k, p]) => [k, encodeURIComponent(p.value)]),
    ),
  );
  const query = Object.entries(spec.params)
    .filter(([, p]) => p.in === 'query')
    .map(([k, p]) => `${encodeURIComponent(k)}=${encodeURIComponent(p.value)}`);
  const full = query.length ? `${url}?${query.join('&')}` : url;
  const out = [...generateBody(spec, full), ...generateParams(spec)];
  if (!spec.body) return out;
  // Top up to at least 1,000 with pairs of single mutations on JSON values (each refused on its own).
  const singles = out.filter(
    (c) =>
      [
        'wrong-type',
        'bad-number',
        'control-chars',
        'injection',
        'timestamp',
        'unknown-field',
        'missing-field',
      ].includes(c.category) &&
      !c.mayAccept &&
      typeof c.body === 'string' &&
      c.path === full &&
      c.body.length < 100_000 &&
      !c.body.includes('"__proto__"'),
  );
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  const seen = new Set(out.map((c) => String(c.body)));
  for (let i = 0; out.length < 1100 && singles.length > 1 && i < 100_000; i++) {
    const a = singles[Math.floor(rnd() * singles.length)];
    const b = singles[Math.floor(rnd() * singles.length)];
    const merged = mergeMutations(spec.body, JSON.parse(a.body as string), JSON.parse(b.body as string));
    if (seen.has(JSON.stringify(merged))) continue;
    seen.add(JSON.stringify(merged));
    out.push({
      endpoint: spec.name,
      category: 'combined',
      what: `${a.what} + ${b.what}`,
      method: spec.method,
      path: full,
      body: JSON.stringify(merged),
      contentType: 'application/json',
    });
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
      out[k] =
        Array.isArray(baseo[k]) &&
        Array.isArray(bo[k]) &&
        Array.isArray(out[k]) &&
        (baseo[k] as Json[]).length === (bo[k] as Json[]).length
          ? (bo[k] as Json[]).map((v, i) => mergeMutations((baseo[k] as Json[])[i], (out[k] as Json[])[i], v))
          : mergeMutations(baseo[k], out[k], bo[k]);
    }
  }
  return out;
}
