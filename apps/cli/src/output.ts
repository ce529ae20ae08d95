/**
 * What a command prints: with `--json`, one JSON document on stdout (for scripts and `jq`);
 * otherwise the same data for a person — a table for a list, `key: value` lines for a record.
 */
export function print(value: unknown, json: boolean): void {
  process.stdout.write((json ? JSON.stringify(value, jsonSafe, 2) : human(value)) + '\n');
}

export function jsonSafe(_key: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString() : v;
}

function cell(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v, jsonSafe);
}

/** A list of records as aligned columns (the keys of all rows, in first-seen order). */
export function table(rows: Record<string, unknown>[]): string {
  if (!rows.length) return '(none)';
  // Columns empty in every row (unset optional fields) are left out.
  const keys = [...new Set(rows.flatMap((r) => Object.keys(r)))].filter((k) => rows.some((r) => cell(r[k]) !== ''));
  const cells = rows.map((r) => keys.map((k) => cell(r[k]).replace(/\s+/g, ' ')));
  const widths = keys.map((k, i) => Math.min(60, Math.max(k.length, ...cells.map((c) => c[i].length))));
  const line = (cs: string[]) =>
    cs
      .map((c, i) => (c.length > widths[i] ? `${c.slice(0, widths[i] - 1)}…` : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(keys), ...cells.map(line)].join('\n');
}

export function human(value: unknown): string {
  if (Array.isArray(value)) return value.every(isRecord) ? table(value) : value.map(cell).join('\n');
  if (!isRecord(value)) return cell(value);
  const entries = Object.entries(value).filter(([, v]) => v !== undefined);
  // `{ policies: [...] }`: the list is the answer.
  const lists = entries.filter(([, v]) => Array.isArray(v) && v.every(isRecord));
  if (entries.length === 1 && lists.length === 1) return table(lists[0][1] as Record<string, unknown>[]);
  const width = Math.max(...entries.map(([k]) => k.length));
  return entries
    .map(([k, v]) =>
      Array.isArray(v) && v.length && v.every(isRecord)
        ? `${k}:\n${indent(table(v as Record<string, unknown>[]))}`
        : `${k.padEnd(width)}  ${cell(v)}`,
    )
    .join('\n');
}

const indent = (s: string) => s.replace(/^/gm, '  ');
const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
