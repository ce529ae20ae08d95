import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// The processors normalize usage with the service's own code: a byte-for-byte copy of the
// contracts' normalizer, so that @tollgate/processors loads without the SDK. Edit the source
// (libs/contracts/src/usage/normalize-usage.ts), then copy it over this package's copy.
describe('normalize-usage.ts', () => {
  it('is a byte-for-byte copy of libs/contracts/src/usage/normalize-usage.ts', () => {
    const source = readFileSync(join(__dirname, '../../../contracts/src/usage/normalize-usage.ts'), 'utf8');
    const copy = readFileSync(join(__dirname, 'normalize-usage.ts'), 'utf8');
    expect(
      copy === source
        ? 'identical'
        : 'differs: run cp libs/contracts/src/usage/normalize-usage.ts libs/processors/src/tollgate/normalize-usage.ts',
    ).toBe('identical');
  });
});
