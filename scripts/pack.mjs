#!/usr/bin/env node
// `npm run pack [-- --out <dir>]`: builds @tollgate/sdk and @tollgate/processors (they are not
// published) and writes both tarballs to <dir> (default packages/), so another project can
// `npm install /path/to/tollgate/packages/tollgate-sdk-0.1.0.tgz`.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outArg = process.argv.indexOf('--out');
const OUT = resolve(outArg > 0 ? process.argv[outArg + 1] : join(ROOT, 'packages'));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
mkdirSync(OUT, { recursive: true });

const steps = [
  {
    dir: 'libs/sdk',
    build: () => execFileSync(process.execPath, [join(ROOT, 'libs/sdk/scripts/build.mjs')], { stdio: 'inherit' }),
  },
  {
    dir: 'libs/processors',
    build: () =>
      execFileSync(process.execPath, [join(ROOT, 'libs/processors/scripts/build.mjs')], { stdio: 'inherit' }),
  },
];
for (const step of steps) {
  process.stderr.write(`building ${step.dir}…\n`);
  step.build();
  const [packed] = JSON.parse(
    execFileSync(npm, ['pack', '--json', '--pack-destination', OUT], {
      cwd: join(ROOT, step.dir),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  process.stdout.write(`${relative(process.cwd(), join(OUT, packed.filename)) || packed.filename}\n`);
}
