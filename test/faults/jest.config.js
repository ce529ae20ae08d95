/** `npm run test:faults`: crash and outage scenarios against the built service as child processes (run after `npm test`). */
const root = require('../../jest.config.js');
const service = root.projects[0];

module.exports = {
  ...service,
  rootDir: '../..',
  displayName: 'faults',
  globalSetup: root.globalSetup,
  testMatch: ['<rootDir>/test/faults/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};
