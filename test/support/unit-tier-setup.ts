import { Socket } from 'node:net';
import type * as PgModule from 'pg';

/**
 * The unit tier (`npm run test:unit`, jest.unit.config.js) runs without PostgreSQL or Redis. A spec that
 * still reaches for one is misfiled: fail it at once, naming it and the rule, instead of letting it hang
 * (ioredis and BullMQ retry an unreachable Redis for ever, and keep jest alive after the run) or pass on
 * a developer's machine and fail on a bare one.
 *
 * Clients may be made (a lazyConnect ioredis, a pg Pool) but never connected, whatever their address:
 * ioredis's Redis and Cluster (and so BullMQ) throw from connect(), pg's Client reports the refusal to its
 * caller. Any other socket to a PostgreSQL or Redis port (the defaults, and those of DATABASE_URL,
 * REDIS_URL and their TEST_ forms) is refused as an unreachable server would refuse it. A refusal that a
 * client swallows still fails the test when it ends. Loopback servers a spec starts itself (a fake sink,
 * a silent socket) stay allowed.
 */
const refusals: Error[] = [];

function refuse(what: string): Error {
  const test = expect.getState().currentTestName;
  const error = new Error(
    `unit tier: ${test ? `"${test}"` : 'this spec'} ${what}. Name its file *.sql.spec.ts or *.int.spec.ts ` +
      `(see CONTRIBUTING.md, "Tests in tiers") so that only \`npm test\` runs it.`,
  );
  refusals.push(error);
  return error;
}

/** A refusal the client kept to itself (an 'error' event it heard, a rejection it caught). */
function failOnRefusals(): void {
  const [first] = refusals.splice(0);
  if (first) throw first;
}
afterEach(failOnRefusals);
afterAll(failOnRefusals);

// Patched where the spec and its libraries load them, so only when they do (no cost to other specs).
jest.mock('ioredis', () => {
  const ioredis = jest.requireActual<typeof import('ioredis')>('ioredis');
  for (const client of [ioredis.Redis, ioredis.Cluster]) {
    // Thrown: a client connects from its constructor or its first command, where this reaches the spec.
    client.prototype.connect = function (): Promise<void> {
      throw refuse('connects to Redis');
    };
  }
  return ioredis;
});

jest.mock('pg', () => {
  const pg = jest.requireActual<typeof PgModule>('pg');
  // pg-pool calls connect() with a callback and reports its error; a throw there would be lost (a hang).
  pg.Client.prototype.connect = function (callback?: (err: Error) => void): Promise<never> | undefined {
    const error = refuse('connects to PostgreSQL');
    if (!callback) return Promise.reject(error);
    process.nextTick(callback, error);
  } as typeof pg.Client.prototype.connect;
  return pg;
});

const forbidden = new Set([5432, 6379]);
for (const name of ['DATABASE_URL', 'DATABASE_READ_URL', 'REDIS_URL', 'TEST_DATABASE_URL', 'TEST_REDIS_URL']) {
  const value = process.env[name];
  if (!value || !URL.canParse(value)) continue;
  const url = new URL(value);
  forbidden.add(Number(url.port || (url.protocol.startsWith('redis') ? 6379 : 5432)));
}

// node:net is one module for the whole worker process: wrap its connect once, not once per spec file.
const unwrapped = Symbol.for('tollgate.unit-tier.connect');
const proto = Socket.prototype as Socket & { [unwrapped]?: (...args: unknown[]) => Socket };
const connect = (proto[unwrapped] ??= proto.connect as (...args: unknown[]) => Socket);
proto.connect = function (this: Socket, ...args: unknown[]): Socket {
  const first = args[0];
  const options = Array.isArray(first) ? first[0] : first;
  const port =
    typeof options === 'object' && options !== null ? Number((options as { port?: unknown }).port) : Number(options);
  if (!forbidden.has(port)) return connect.apply(this, args);
  // Refused as a server would refuse it: through 'error', which every client listens for.
  const error = refuse(`connects to port ${port} (PostgreSQL or Redis)`);
  process.nextTick(() => this.destroy(error));
  return this;
} as typeof Socket.prototype.connect;
