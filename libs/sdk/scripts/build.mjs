// Builds @tollgate/sdk twice with tsc — CommonJS into dist/cjs, ESM into dist/esm — with declarations.
// The ESM output gets explicit `.js` extensions on relative imports (Node's ESM loader needs them;
// the sources, shared with the CommonJS service, have none).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
// `--out DIR` builds elsewhere (tests build their own copy, so parallel test files never share one).
const outArg = process.argv.indexOf('--out');
const dist = outArg > 0 ? resolve(process.argv[outArg + 1]) : join(root, 'dist');
rmSync(dist, { recursive: true, force: true });

const builds = [
  { dir: 'cjs', module: 'commonjs', moduleResolution: 'node', type: 'commonjs' },
  { dir: 'esm', module: 'es2022', moduleResolution: 'bundler', type: 'module' },
];
for (const b of builds) {
  const outDir = join(dist, b.dir);
  execFileSync(
    process.execPath,
    [
      tsc,
      '-p',
      join(root, 'tsconfig.build.json'),
      '--module',
      b.module,
      '--moduleResolution',
      b.moduleResolution,
      '--outDir',
      outDir,
    ],
    { stdio: 'inherit' },
  );
  writeFileSync(join(outDir, 'package.json'), JSON.stringify({ type: b.type }) + '\n');
  if (b.type === 'module') addExtensions(outDir);
}

function walk(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

function addExtensions(dir) {
  const spec = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"]+)\2/g;
  for (const file of walk(dir)) {
    if (!file.endsWith('.js') && !file.endsWith('.d.ts')) continue;
    const text = readFileSync(file, 'utf8');
    const fixed = text.replace(spec, (all, lead, q, rel) => {
      if (/\.(c|m)?js$/.test(rel)) return all;
      const base = resolve(dirname(file), rel);
      const target =
        existsSync(base + '.js') || existsSync(base + '.d.ts')
          ? `${rel}.js`
          : existsSync(join(base, 'index.js'))
            ? `${rel}/index.js`
            : null;
      if (!target) throw new Error(`${file}: cannot resolve ${rel}`);
      return `${lead}${q}${target}${q}`;
    });
    if (fixed !== text) writeFileSync(file, fixed);
  }
}
console.log(`built ${builds.map((b) => join(dist, b.dir)).join(' and ')}`);
