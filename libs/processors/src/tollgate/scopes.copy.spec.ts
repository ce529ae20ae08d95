import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// The processors map scopes to context fields with the service's own table: a byte-for-byte copy
// of the contracts' scopes.ts, so that @tollgate/processors loads without the SDK. Edit the source
// (libs/contracts/src/scopes.ts), then copy it over this package's copy.
describe('scopes.ts', () => {
  it('is a byte-for-byte copy of libs/contracts/src/scopes.ts', () => {
    const source = readFileSync(join(__dirname, '../../../contracts/src/scopes.ts'), 'utf8');
    const copy = readFileSync(join(__dirname, 'scopes.ts'), 'utf8');
    expect(
      copy === source
        ? 'identical'
        : 'differs: run cp libs/contracts/src/scopes.ts libs/processors/src/tollgate/scopes.ts',
    ).toBe('identical');
  });
});
