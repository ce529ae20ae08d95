/**
 * `npm run test:unit`: the pure specs, without PostgreSQL, Redis or a running service (no globalSetup).
 * A spec beside the code belongs here unless its name says otherwise (CONTRIBUTING.md, "Tests in tiers"):
 *   *.sql.spec.ts  a statement against the real PostgreSQL;
 *   *.int.spec.ts  anything else that needs PostgreSQL, Redis or the running service.
 * test/** and libs/processors/test/e2e/** are integration and end-to-end specs by place. The unit tier's
 * setup file refuses to connect Redis and PostgreSQL clients, so a misnamed spec fails at once, by name.
 */
const root = require('./jest.config.js');
const [service, processors] = root.projects;

const notUnit = ['/node_modules/', '/dist/', '\\.sql\\.spec\\.ts$', '\\.int\\.spec\\.ts$'];
const unit = (project, displayName, testMatch, ignore = []) => ({
  ...project,
  displayName,
  globalSetup: undefined,
  setupFilesAfterEnv: [...(project.setupFilesAfterEnv ?? []), '<rootDir>/test/support/unit-tier-setup.ts'],
  testMatch,
  testPathIgnorePatterns: [...notUnit, ...ignore],
});

module.exports = {
  projects: [
    unit(
      service,
      'unit',
      ['<rootDir>/libs/*/src/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts'],
      ['<rootDir>/libs/processors/'],
    ),
    unit(
      processors,
      'processors-unit',
      ['<rootDir>/libs/processors/**/*.spec.ts'],
      ['<rootDir>/libs/processors/test/e2e/'],
    ),
  ],
};
