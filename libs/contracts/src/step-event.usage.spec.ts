import { usageSchema } from './step-event';

describe('usageSchema cacheWrite1hTokens', () => {
  it('accepts 1-hour cache writes that are a part of the cache writes', () => {
    const usage = { inputTokens: 1100, outputTokens: 10, cacheWriteTokens: 1000, cacheWrite1hTokens: 400 };
    expect(usageSchema.parse(usage)).toEqual(usage);
    expect(usageSchema.parse({ ...usage, cacheWrite1hTokens: 1000 })).toEqual({ ...usage, cacheWrite1hTokens: 1000 });
  });

  it('refuses more 1-hour writes than cache writes, naming the field', () => {
    for (const usage of [
      { inputTokens: 1100, outputTokens: 10, cacheWriteTokens: 1000, cacheWrite1hTokens: 1001 },
      { inputTokens: 1100, outputTokens: 10, cacheWrite1hTokens: 1 },
    ]) {
      const result = usageSchema.safeParse(usage);
      expect(result.success).toBe(false);
      expect(result.error!.issues.map((i) => ({ path: i.path, message: i.message }))).toEqual([
        {
          path: ['cacheWrite1hTokens'],
          message: 'must not exceed cacheWriteTokens (it is a part of it, not added on top)',
        },
      ]);
    }
  });
});
