#!/usr/bin/env node
// Renames a library in one mechanical pass: `node scripts/rename-library.mjs metrics usage-metrics`.
// Moves libs/<from> to libs/<to> with `git mv` and rewrites every reference in tracked text files:
// the `@tollgate/<from>` alias (and its subpaths), `libs/<from>/` paths, and relative imports that
// reach into the library from a sibling (`../<from>/src`). Class and file names inside the library
// are left alone. Run it on a clean tree, then `npm run typecheck && npm run lint && npm run test:unit`.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const [from, to] = process.argv.slice(2);
const NAME = /^[a-z][a-z0-9-]*$/;
if (!NAME.test(from ?? '') || !NAME.test(to ?? '')) {
  console.error('usage: node scripts/rename-library.mjs <from> <to>   (library folder names under libs/)');
  process.exit(2);
}
const git = (...args) => execFileSync('git', args, { encoding: 'utf8' });
if (git('status', '--porcelain', '--untracked-files=no').trim()) {
  console.error('the work tree has changes: commit or wait for them first, so this pass is one commit of its own');
  process.exit(1);
}

git('mv', `libs/${from}`, `libs/${to}`);

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const rewrites = [
  // '@tollgate/metrics', "@tollgate/metrics/…", `@tollgate/metrics` — not '@tollgate/metrics-other'.
  [new RegExp(`@tollgate/${escape(from)}(?=[/'"\`\\s)\\]]|$)`, 'gm'), `@tollgate/${to}`],
  [new RegExp(`libs/${escape(from)}(?=[/'"\`\\s)\\]]|$)`, 'gm'), `libs/${to}`],
  [new RegExp(`((?:\\.\\./)+)${escape(from)}/src\\b`, 'g'), `$1${to}/src`],
];
const TEXT = /\.(ts|js|mjs|cjs|json|md|ya?ml|html|css|sh)$|(^|\/)(Dockerfile|\.ci\/run)$/;
const SKIP = /^(package-lock\.json|generated\/|dist\/|scripts\/rename-library\.mjs$)/;

const changed = [];
for (const file of git('ls-files').split('\n').filter(Boolean)) {
  if (!TEXT.test(file) || SKIP.test(file)) continue;
  const before = readFileSync(file, 'utf8');
  const after = rewrites.reduce((text, [pattern, replacement]) => text.replace(pattern, replacement), before);
  if (after !== before) {
    writeFileSync(file, after);
    changed.push(file);
  }
}
console.log(`libs/${from} → libs/${to}; references rewritten in ${changed.length} files:`);
for (const f of changed) console.log(`  ${f}`);
console.log(
  'next: npm run typecheck && npm run typecheck:processors && npm run lint && npm run test:unit, then commit',
);
