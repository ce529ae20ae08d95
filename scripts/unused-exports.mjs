#!/usr/bin/env node
// Lists what each library's index.ts re-exports that no file outside that library mentions:
// `node scripts/unused-exports.mjs`. A name printed here is used only inside its library (or
// nowhere): drop it from the index, and from the code when nothing uses it at all. It reads tracked
// and untracked files alike (git grep --untracked), so work in progress counts as a user. The two
// published packages (libs/sdk, libs/processors) are left out: their exports are for their users.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const SKIP = new Set(['sdk', 'processors']);
const mentions = (name) => {
  try {
    return execFileSync(
      'git',
      [
        'grep',
        '--untracked',
        '-l',
        '-w',
        '-e',
        name,
        '--',
        'apps',
        'libs',
        'test',
        'bench',
        'scripts',
        '*.ts',
        '*.js',
        '*.mjs',
      ],
      { encoding: 'utf8' },
    )
      .split('\n')
      .filter(Boolean);
  } catch {
    return []; // git grep exits 1 when nothing matches
  }
};

let total = 0;
for (const lib of readdirSync('libs')
  .filter((d) => !SKIP.has(d))
  .sort()) {
  let index;
  try {
    index = readFileSync(`libs/${lib}/src/index.ts`, 'utf8');
  } catch {
    continue;
  }
  const names = [...index.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}\s+from/g)].flatMap((m) =>
    m[1]
      .split(',')
      .map((n) =>
        n
          .trim()
          .replace(/^type\s+/, '')
          .split(/\s+as\s+/)
          .pop(),
      )
      .filter(Boolean),
  );
  const unused = names.filter((n) => !mentions(n).some((f) => !f.startsWith(`libs/${lib}/`)));
  total += unused.length;
  if (unused.length) console.log(`libs/${lib}/src/index.ts: ${unused.join(', ')}`);
}
console.log(`${total} re-exports used only inside their library (export * lines are not checked)`);
