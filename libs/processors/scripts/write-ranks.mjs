#!/usr/bin/env node
// Writes the rank table the token counter loads at start-up (libs/processors/src/token-count/o200k_base.bpe)
// from js-tiktoken's o200k_base rank file: RankTable.fromTiktoken(…).toBinary(), bpe.ts compiled
// in memory, so the file is written by the very code that reads it.
//
//   node libs/processors/scripts/write-ranks.mjs
//
// bpe.spec.ts checks that the file holds exactly js-tiktoken's ranks: run this after upgrading js-tiktoken.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const ts = require('typescript');
const source = join(here, '..', 'src', 'token-count', 'bpe.ts');
const { outputText } = ts.transpileModule(readFileSync(source, 'utf8'), {
  compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
  fileName: source,
});
const mod = { exports: {} };
new Function('exports', 'require', 'module', outputText)(mod.exports, require, mod);
const { RankTable } = mod.exports;

const name = 'o200k_base';
const ranks = require(`js-tiktoken/ranks/${name}`);
const file = RankTable.fromTiktoken(ranks.default ?? ranks).toBinary();
const out = join(here, '..', 'src', 'token-count', `${name}.bpe`);
writeFileSync(out, file);
console.log(`${out}: ${file.length} bytes`);
