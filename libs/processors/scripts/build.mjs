#!/usr/bin/env node
// Builds @tollgate/processors (CommonJS, with declarations) into dist/: `node libs/processors/scripts/build.mjs [--out DIR]`.
// rootDir is libs/, so the package's own code lands in dist/processors/src and what it imports from
// libs/contracts/src (types, the usage normalizer, the scope table) in dist/contracts/src. The token
// counter reads its rank table from beside its compiled code, so the table is copied there.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
const outArg = process.argv.indexOf('--out');
const dist = outArg > 0 ? resolve(process.argv[outArg + 1]) : join(root, 'dist');
// A clean tree: a file left by an earlier layout would otherwise be packed.
rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json'), '--outDir', dist], { stdio: 'inherit' });
execFileSync(process.execPath, [join(root, 'scripts/copy-ranks.mjs'), join(dist, 'processors/src')], {
  stdio: 'inherit',
});
// Only types come from the contracts' zod schemas: the compiled processors must load without zod.
const loaded = execFileSync(
  process.execPath,
  [
    '-e',
    `require(${JSON.stringify(join(dist, 'processors/src/index.js'))}); console.log(Object.keys(require.cache).join('\\n'))`,
  ],
  { encoding: 'utf8' },
);
const zod = loaded.split('\n').find((file) => /[\\/]node_modules[\\/]zod[\\/]/.test(file));
if (zod) throw new Error(`the compiled processors load zod (${zod}): import the contracts' types with \`import type\``);
console.log(`built ${dist}`);
