/**
 * `npm run test:cluster`: BullMQ and the rate limiter on a real Redis Cluster that the spec starts
 * on 127.0.0.1:7001-7006 and removes (`*.test.ts`, so `npm test` leaves it alone). It uses the
 * test database like `npm test` (the same globalSetup recreates it).
 */
const root = require('../../jest.config.js');
const service = root.projects[0];

module.exports = {
  ...service,
  rootDir: '../..',
  displayName: 'cluster',
  globalSetup: root.globalSetup,
  testMatch: ['<rootDir>/test/cluster/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};
