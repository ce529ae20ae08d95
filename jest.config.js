/** One jest run for the whole repository: pure specs beside the code, integration specs against
 * the real PostgreSQL and Redis, end-to-end specs in test/ against a running service. */
const swc = ['@swc/jest', { jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true }, target: 'es2022', keepClassNames: true } }];
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.(t|j)s$': swc },
  moduleNameMapper: {
    '^@tollgate/(contracts|database|ledger|metrics|platform)$': '<rootDir>/libs/$1/src/index.ts',
  },
  testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts', '<rootDir>/test/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/', '<rootDir>/test/faults/', '<rootDir>/test/bad-input/'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  testTimeout: 30000,
};
