/** Runs this library's specs alone (`npx jest -c libs/processors/jest.config.js`). The root config
 * runs the same files; nothing here needs a database or the network. */
const path = require('node:path');
const swc = (syntax) => ['@swc/jest', { jsc: { parser: { syntax }, target: 'es2022', keepClassNames: true }, module: { type: 'commonjs' } }];
module.exports = {
  rootDir: path.resolve(__dirname, '../..'),
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': swc('typescript'), '^.+\\.(c|m)?js$': swc('ecmascript') },
  testMatch: ['<rootDir>/libs/processors/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  // @mastra/core's CommonJS build reaches ESM-only packages (the AI SDK v7 aliases, @workflow/serde,
  // p-retry through import()). Node loads them with require(esm); Jest cannot, so every file is
  // transpiled to CommonJS. swc is fast and Jest caches the output, so this costs seconds once.
  transformIgnorePatterns: [],
  testTimeout: 30000,
};
