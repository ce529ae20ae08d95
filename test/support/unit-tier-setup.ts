import { Socket } from 'node:net';

/**
 * The unit tier (`npm run test:unit`, jest.unit.config.js) runs without PostgreSQL or Redis. A spec that
 * still reaches one of them is misfiled: fail it at once, naming the rule, instead of letting it hang on
 * a connection timeout or pass on a developer's machine and fail on a bare one. Loopback servers a spec
 * starts itself (a fake sink, a silent socket) stay allowed.
 */
const forbidden = new Set(
  [
    process.env.TEST_DATABASE_URL ?? 'postgresql://127.0.0.1:5432',
    process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
  ]
    .map((url) => new URL(url))
    .map((u) => Number(u.port || (u.protocol.startsWith('redis') ? 6379 : 5432))),
);
forbidden.add(5432);
forbidden.add(6379);

const connect = Socket.prototype.connect as (...args: unknown[]) => Socket;
Socket.prototype.connect = function (this: Socket, ...args: unknown[]): Socket {
  const first = args[0];
  const options = Array.isArray(first) ? first[0] : first;
  const port =
    typeof options === 'object' && options !== null ? Number((options as { port?: unknown }).port) : Number(options);
  if (forbidden.has(port)) {
    throw new Error(
      `unit tier: this spec connects to port ${port} (PostgreSQL or Redis). Name it *.sql.spec.ts or *.int.spec.ts ` +
        `(see CONTRIBUTING.md, "Tests in tiers") so that only \`npm test\` runs it.`,
    );
  }
  return connect.apply(this, args);
} as typeof Socket.prototype.connect;
