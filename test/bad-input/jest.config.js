/** `npm run test:bad-input`: the malformed-request generator against the real service, every route with a parameter (kept out of `npm test`: it sends about 27,000 requests, a minute or two). */
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
