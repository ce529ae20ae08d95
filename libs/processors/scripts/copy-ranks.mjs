#!/usr/bin/env node
// Copies the rank tables (src/token-count/*.bpe) next to the compiled token counter, which reads
// them from its own directory: `node libs/processors/scripts/copy-ranks.mjs <dir compiled from src>`.
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const from = join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'token-count');
const out = process.argv[2];
if (!out) throw new Error('usage: copy-ranks.mjs <dir compiled from libs/processors/src>');
const to = join(resolve(out), 'token-count');
mkdirSync(to, { recursive: true });
for (const file of readdirSync(from).filter((f) => f.endsWith('.bpe'))) copyFileSync(join(from, file), join(to, file));
