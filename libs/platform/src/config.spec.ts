import { ConfigError, loadConfig } from './config';

describe('loadConfig', () => {
  it('fills defaults for a bare environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      PORT: 3000,
      DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/tollgate',
      REDIS_URL: 'redis://127.0.0.1:6379',
      LOG_LEVEL: 'log',
    });
    expect(c.TOLLGATE_ADMIN_TOKEN).toBeUndefined();
  });

  it('names every malformed variable', () => {
    expect(() => loadConfig({ PORT: 'eighty', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud' })).toThrow(ConfigError);
    try {
      loadConfig({ PORT: 'eighty', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud', TOLLGATE_ADMIN_TOKEN: 'short' });
    } catch (e) {
      const msg = (e as Error).message;
      for (const name of ['PORT', 'DATABASE_URL', 'LOG_LEVEL', 'TOLLGATE_ADMIN_TOKEN']) expect(msg).toContain(name);
    }
  });
});
