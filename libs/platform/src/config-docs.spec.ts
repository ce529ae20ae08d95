import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_VARIABLES } from './config';

describe("the README's Configuration table", () => {
  it('lists exactly the variables the service reads', () => {
    const readme = readFileSync(join(__dirname, '../../../README.md'), 'utf8');
    const section = readme.slice(
      readme.indexOf('## Configuration'),
      readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1),
    );
    const documented = new Set<string>();
    for (const line of section.split('\n')) {
      const first = /^\| ([^|]+) \|/.exec(line)?.[1] ?? '';
      for (const m of first.matchAll(/`([A-Z][A-Z0-9_]+)`/g)) documented.add(m[1]);
    }
    expect({
      missing: CONFIG_VARIABLES.filter((v) => !documented.has(v)).sort(),
      unknown: [...documented].filter((v) => !CONFIG_VARIABLES.includes(v)).sort(),
    }).toEqual({ missing: [], unknown: [] });
  });
});
