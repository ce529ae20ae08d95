import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TiktokenBPE } from 'js-tiktoken/lite';
import { RankTable } from './bpe';

/**
 * The o200k_base rank table shipped beside this module (written from js-tiktoken's rank file by
 * `scripts/write-ranks.mjs`; `bpe.spec.ts` checks it holds exactly those ranks).
 */
export const O200K_TABLE_FILE = join(__dirname, 'o200k_base.bpe');

let table: RankTable | undefined;
/** How the table in use was loaded: from the shipped file, or rebuilt from js-tiktoken's. */
export let o200kSource: 'file' | 'js-tiktoken' | undefined;

/**
 * o200k_base (GPT-4o, GPT-5), loaded once, on first use: read from the shipped file (1.6 MB, a
 * few ms; nothing parsed but its header), else — a bundle that left the file behind — built from
 * js-tiktoken's rank module (a 2 MB module to parse and decode: tens of ms), with the same ranks.
 */
export function o200kRanks(): RankTable {
  if (table) return table;
  let file: Buffer | undefined;
  try {
    file = readFileSync(O200K_TABLE_FILE);
  } catch {
    file = undefined;
  }
  if (file) {
    table = RankTable.fromBinary(file);
    o200kSource = 'file';
  } else {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ranks = require('js-tiktoken/ranks/o200k_base') as TiktokenBPE & { default?: TiktokenBPE };
    table = RankTable.fromTiktoken(ranks.default ?? ranks);
    o200kSource = 'js-tiktoken';
  }
  return table;
}
