import { AsyncResource } from 'node:async_hooks';

let installed = false;

/**
 * Fastify binds a callback to a new AsyncResource for every request that has a body. On Node 20
 * `AsyncResource#bind` also attaches the deprecated (DEP0172) `asyncResource` property through two
 * `deprecate()` wrappers and `Object.defineProperties` on every call — nodejs/node#58218; newer Node
 * lines drop the property. Measured on the guard route (bench:guard, concurrency 64): about a fifth
 * of the API's CPU per check. This keeps what the binding is for — the callback runs in the
 * resource's async context (AsyncLocalStorage, APM spans), with `this` as before — without the
 * deprecated property. Installed once, only where Node still attaches it.
 */
export function useLeanAsyncResourceBind(): void {
  if (installed) return;
  installed = true;
  const probe = new AsyncResource('tollgate-probe').bind(() => undefined);
  if (!Object.getOwnPropertyDescriptor(probe, 'asyncResource')) return;
  AsyncResource.prototype.bind = function bind<Func extends (...args: any[]) => any>(
    this: AsyncResource,
    fn: Func,
    thisArg?: ThisParameterType<Func>,
  ) {
    if (typeof fn !== 'function') throw new TypeError('The "fn" argument must be of type function');
    const resource = this;
    return function bound(this: unknown, ...args: unknown[]) {
      return resource.runInAsyncScope(fn, thisArg === undefined ? this : thisArg, ...args);
    } as unknown as Func;
  };
}
