import { KeyedMutex } from './keyed-mutex';

describe('KeyedMutex', () => {
  it('runs holders of one key one at a time, in arrival order', async () => {
    const m = new KeyedMutex();
    const order: string[] = [];
    const task = async (name: string) => {
      const release = await m.acquire(['k']);
      order.push(`${name}:in`);
      await new Promise((r) => setTimeout(r, 5));
      order.push(`${name}:out`);
      release();
    };
    await Promise.all([task('a'), task('b'), task('c')]);
    expect(order).toEqual(['a:in', 'a:out', 'b:in', 'b:out', 'c:in', 'c:out']);
  });

  it('lets different keys run together and never deadlocks crossed key sets', async () => {
    const m = new KeyedMutex();
    let inside = 0;
    let most = 0;
    const task = async (keys: string[]) => {
      const release = await m.acquire(keys);
      inside += 1;
      most = Math.max(most, inside);
      await new Promise((r) => setTimeout(r, 5));
      inside -= 1;
      release();
    };
    await Promise.all([task(['x']), task(['y']), task(['a', 'b']), task(['b', 'a'])]);
    expect(most).toBeGreaterThanOrEqual(2);
  });
});
