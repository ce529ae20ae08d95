#!/usr/bin/env node
/**
 * Fails when the folders of a library import each other in a circle (STYLE.md: types two concepts
 * share live in a leaf both import). For every lib, each top-level folder of its src/ (a file at
 * src/'s top is its own node) is a node; a relative import from one folder into another is an
 * edge. Every strongly connected component of more than one node is printed with one import of
 * each edge in it, and the exit code is 1.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(dirname(new URL(import.meta.url).pathname), '..');
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*['"](\.{1,2}\/[^'"]+)['"]/g;

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.ts$/.test(name) && !/\.(spec|test)\.ts$/.test(name) && !/\.fixture\.ts$/.test(name) ? [path] : [];
  });
}

/** The node of a file of `src`: its top-level folder, or the file itself at the top. */
const nodeOf = (src, file) => relative(src, file).split(sep)[0];

function graph(src) {
  const edges = new Map();
  for (const file of files(src)) {
    const from = nodeOf(src, file);
    for (const [, spec] of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const target = resolve(dirname(file), spec);
      if (!target.startsWith(src + sep)) continue;
      const to = nodeOf(src, target.endsWith('.ts') ? target : `${target}.ts`).replace(/\.ts\.ts$/, '.ts');
      if (to === from) continue;
      if (!edges.has(from)) edges.set(from, new Map());
      if (!edges.get(from).has(to)) edges.get(from).set(to, `${relative(root, file)} → ${spec}`);
    }
  }
  return edges;
}

/** Tarjan's strongly connected components. */
function components(edges) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const c = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1) out.push(c.sort());
    }
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return out;
}

let failed = false;
for (const lib of readdirSync(join(root, 'libs'))) {
  const src = join(root, 'libs', lib, 'src');
  try {
    statSync(src);
  } catch {
    continue;
  }
  const edges = graph(src);
  for (const c of components(edges)) {
    failed = true;
    console.error(`libs/${lib}/src: folders in an import cycle: ${c.join(', ')}`);
    for (const from of c)
      for (const [to, where] of edges.get(from) ?? []) if (c.includes(to)) console.error(`  ${from} → ${to}: ${where}`);
  }
}
if (failed) process.exit(1);
console.log('no import cycles between the folders of a lib');
