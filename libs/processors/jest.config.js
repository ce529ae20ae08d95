/** The processors' specs: pure logic, the in-memory Tollgate, real Mastra Agents with ai/test mock
 * models, and end-to-end specs (test/e2e) against the real service on PostgreSQL and Redis. The root
 * config runs it as the `processors` project (its own globalSetup then creates the test database
 * once); `npx jest -c libs/processors/jest.config.js` runs it alone, with this globalSetup. */
const path = require('node:path');
const swcTs = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
      keepClassNames: true,
    },
    module: { type: 'commonjs' },
  },
];
const swcJs = [
  '@swc/jest',
  { jsc: { parser: { syntax: 'ecmascript' }, target: 'es2022', keepClassNames: true }, module: { type: 'commonjs' } },
];
module.exports = {
  displayName: 'processors',
  rootDir: path.resolve(__dirname, '../..'),
  testEnvironment: 'node',
  // The end-to-end specs start the real API in process (Nest decorators, the @tollgate/* libs).
  transform: { '^.+\\.ts$': swcTs, '^.+\\.(c|m)?js$': swcJs },
  moduleNameMapper: require('../../jest.aliases.js'),
  setupFilesAfterEnv: ['<rootDir>/test/support/jest-setup.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  testMatch: ['<rootDir>/libs/processors/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  // @mastra/core's CommonJS build reaches ESM-only packages (the AI SDK v7 aliases, @workflow/serde,
  // p-retry through import()). Node loads them with require(esm); Jest cannot, so every file is
  // transpiled to CommonJS. swc is fast and Jest caches the output, so this costs seconds once.
  transformIgnorePatterns: [],
};
