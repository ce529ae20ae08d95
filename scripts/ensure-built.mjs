#!/usr/bin/env node
// `npm start`, `npm run tollgate -- …` and the other start scripts call this before node runs
// dist/: it builds only when a source differs from what dist/ was built from, and then only
// what changed (tsc --incremental), saying so on stderr. A current dist/ costs one hash of the
// sources (tens of milliseconds), not a 15-second rebuild.
//
//   node scripts/ensure-built.mjs [--out <dir>] [--quiet]
//
// The fingerprint (each input's content hash) is kept in <out>/.build-fingerprint.json, written
// only after a build succeeded; a type error fails the build as `npm run build` does.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const outArg = args.indexOf('--out');
const OUT = resolve(ROOT, outArg >= 0 ? args[outArg + 1] : 'dist');
const quiet = args.includes('--quiet');
const STAMP = join(OUT, '.build-fingerprint.json');
const ENTRY = join(OUT, 'apps', 'main.js');

/** What tsconfig.build.json compiles, plus what changes its output. */
const SOURCE_DIRS = ['apps', 'libs', 'bench', 'prisma', 'generated'];
const EXCLUDED = [/^libs\/(sdk|processors)\//, /\.spec\.ts$/, /(^|\/)node_modules\//, /\.d\.ts$/];
const CONFIG_FILES = ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];
const SCHEMA = 'prisma/schema.prisma';

function walk(dir, files) {
  let entries;
  try {
    entries = readdirSync(join(ROOT, dir), { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) {
      if (e.name !== 'node_modules' && e.name !== 'dist') walk(rel, files);
    } else if (rel.endsWith('.ts') && !EXCLUDED.some((x) => x.test(rel))) files.push(rel);
  }
}

const hashOf = (rel) =>
  createHash('sha1')
    .update(readFileSync(join(ROOT, rel)))
    .digest('hex');

function fingerprint() {
  const files = [];
  for (const d of SOURCE_DIRS) walk(d, files);
  const sources = {};
  for (const f of [...files.sort(), ...CONFIG_FILES.filter((f) => existsSync(join(ROOT, f)))]) sources[f] = hashOf(f);
  return sources;
}

function readStamp() {
  try {
    return JSON.parse(readFileSync(STAMP, 'utf8'));
  } catch {
    return null;
  }
}

function run(cmd, cmdArgs) {
  const bin = join(ROOT, 'node_modules', '.bin', cmd);
  const r = spawnSync(bin, cmdArgs, { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  return r.status === 0 ? null : `${cmd} exited with ${r.status ?? r.signal}`;
}

const started = Date.now();
const stamp = readStamp();
const schemaHash = hashOf(SCHEMA);
const needsGenerate = !existsSync(join(ROOT, 'generated', 'prisma')) || stamp?.schema !== schemaHash;
if (needsGenerate) {
  if (!quiet) process.stderr.write('building… (prisma generate)\n');
  const r = spawnSync(join(ROOT, 'node_modules', '.bin', 'prisma'), ['generate'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (r.status !== 0) process.exit(r.status || 1);
}
const sources = fingerprint();
const before = stamp?.sources ?? {};
const changed = Object.keys(sources).filter((f) => before[f] !== sources[f]);
const removed = Object.keys(before).filter((f) => !(f in sources));
if (existsSync(ENTRY) && stamp && !changed.length && !removed.length) process.exit(0);

if (!quiet) {
  const what =
    !stamp || !existsSync(ENTRY)
      ? 'no current build'
      : `${changed.length + removed.length} file${changed.length + removed.length === 1 ? '' : 's'} changed since the last build`;
  process.stderr.write(`building… (${what}${outArg >= 0 ? `, into ${relative(ROOT, OUT) || OUT}` : ''})\n`);
}
mkdirSync(OUT, { recursive: true });
const outFlags = outArg >= 0 ? ['--outDir', OUT] : [];
// Only the changed files and their direct importers are checked again (a full check is
// `npm run typecheck`); tsc writes its output even on a type error, so the aliases are always
// rewritten — dist/ is never left with unresolvable `@tollgate/…` imports.
const typeErrors = run('tsc', [
  '-p',
  'tsconfig.build.json',
  '--incremental',
  '--assumeChangesOnlyAffectDirectDependencies',
  '--tsBuildInfoFile',
  join(OUT, '.tsbuildinfo'),
  ...outFlags,
]);
const aliasError = run('tsc-alias', ['-p', 'tsconfig.build.json', ...outFlags]);
if (typeErrors || aliasError) {
  process.stderr.write(
    `build failed: ${typeErrors ?? aliasError} (fix the errors above; the next start builds again)\n`,
  );
  process.exit(1);
}
writeFileSync(STAMP, JSON.stringify({ schema: schemaHash, sources }) + '\n');
if (!quiet) process.stderr.write(`built in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
