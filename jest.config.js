/** One jest run for the whole repository: pure specs beside the code, integration specs against
 * the real PostgreSQL and Redis, end-to-end specs in test/ against a running service. */
const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
      keepClassNames: true,
    },
  },
];

const service = {
  displayName: 'service',
  setupFilesAfterEnv: ['<rootDir>/test/support/jest-setup.ts'],
  testEnvironment: 'node',
  transform: { '^.+\\.(t|j)s$': swc },
  moduleNameMapper: require('./jest.aliases.js'),
  testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts', '<rootDir>/test/**/*.spec.ts'],
  testPathIgnorePatterns: [
    '/node_modules/',
    '/dist/',
    '<rootDir>/libs/processors/',
    '<rootDir>/test/faults/',
    '<rootDir>/test/bad-input/',
  ],
};

module.exports = {
  // The test database is created once per run, before any project starts.
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  // The processors' own globalSetup is for running them alone; here the one above has run.
  projects: [service, { ...require('./libs/processors/jest.config.js'), globalSetup: undefined }],
};
