/**
 * `npm run test:replica`: metric queries on a real streaming replica. The spec makes its own
 * primary (initdb, 127.0.0.1:5434) and replica (pg_basebackup -R, 127.0.0.1:5433) and removes both;
 * it needs no test database, so there is no globalSetup.
 */
const root = require('../../jest.config.js');
const service = root.projects[0];

module.exports = {
  ...service,
  rootDir: '../..',
  displayName: 'replica',
  // *.test.ts, so that `npm test` (which runs *.spec.ts) leaves it alone.
  testMatch: ['<rootDir>/test/replica/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};
