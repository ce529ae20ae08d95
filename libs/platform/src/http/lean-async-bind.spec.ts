import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';
import { useLeanAsyncResourceBind } from './lean-async-bind';

describe('useLeanAsyncResourceBind', () => {
  beforeAll(() => useLeanAsyncResourceBind());

  it('still runs a bound callback in the context it was bound in, not the one that calls it', async () => {
    const store = new AsyncLocalStorage<string>();
    const bound = store.run('request-1', () => new AsyncResource('test').bind(() => store.getStore()));
    const seen = await store.run('request-2', () => new Promise((resolve) => setImmediate(() => resolve(bound()))));
    expect(seen).toBe('request-1');
  });

  it('passes arguments and the return value through, with the call-time this unless one was bound', () => {
    const resource = new AsyncResource('test');
    const receiver = { n: 2 };
    const viaCall = resource.bind(function (this: { n: number }, a: number, b: number) {
      return this.n * (a + b);
    });
    expect(viaCall.call(receiver, 3, 4)).toBe(14);
    // bind(fn, thisArg) is Node's documented signature; @types/node declares only bind(fn).
    const bindWithThis = resource.bind.bind(resource) as unknown as (
      fn: (this: { n: number }) => number,
      thisArg: { n: number },
    ) => (this: unknown) => number;
    const fixed = bindWithThis(
      function (this: { n: number }) {
        return this.n;
      },
      { n: 7 },
    );
    expect(fixed.call(receiver)).toBe(7);
  });

  it('no longer attaches the deprecated asyncResource property', () => {
    const bound = new AsyncResource('test').bind(() => undefined);
    expect(Object.getOwnPropertyDescriptor(bound, 'asyncResource')).toBeUndefined();
  });

  it('refuses a non-function as before', () => {
    // By message: under jest the replacement may come from another test file's realm (another TypeError).
    expect(() => new AsyncResource('test').bind(42 as never)).toThrow('The "fn" argument must be of type function');
  });
});
