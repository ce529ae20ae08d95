/** The databases and Redis prefix the test run uses; never the development database. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate_test';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789';
