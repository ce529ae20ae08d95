/** `npm run test:bad-input`: the malformed-request generator against the real service (kept out of `npm test`: it sends about 10,000 requests). */
const root = require('../../jest.config.js');
const service = root.projects[0];

module.exports = {
  ...service,
  rootDir: '../..',
  displayName: 'bad-input',
  globalSetup: root.globalSetup,
  testMatch: ['<rootDir>/test/bad-input/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};
