import { isIP } from 'node:net';
import { z } from 'zod';

const durationMs = z.coerce.number().int().positive();

/** `host.name`, `10.0.0.1`, `[::1]`, `10.0.0.0/8` or `fd00::/8`. */
function isAllowHostEntry(entry: string): boolean {
  const [address, prefix, extra] = entry.replace(/^\[([^\]]*)\]/, '$1').split('/');
  const family = isIP(address);
  if (family)
    return (
      extra === undefined &&
      (prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128)))
    );
  return prefix === undefined && /^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?\.?$/.test(entry);
}

/** Every setting the service reads, validated once at boot. */
const configSchema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    HOST: z.string().min(1).default('0.0.0.0'),
    DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).default('postgresql://postgres@127.0.0.1:5432/tollgate'),
    /** A read replica for metric queries; unset, they use DATABASE_URL. The guard always reads the primary. */
    DATABASE_READ_URL: z.url({ protocol: /^postgres(ql)?$/ }).optional(),
    DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(500).default(20),
    REDIS_URL: z.url({ protocol: /^rediss?$/ }).default('redis://127.0.0.1:6379'),
    TOLLGATE_ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'log', 'debug', 'verbose']).default('log'),
    /** How far in the future an event's occurredAt may be (clock skew between agents and us). */
    INGEST_MAX_FUTURE_SKEW_MS: durationMs.default(5 * 60_000),
    /**
     * How far in the past an event's occurredAt may be, in days (a project may accept less). Each
     * month of the log is a partition: an unbounded backfill would make every project's queries plan
     * hundreds of them.
     */
    INGEST_MAX_AGE_DAYS: z.coerce.number().int().min(1).max(36_500).default(35),
    INGEST_MAX_BODY_BYTES: z.coerce
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    /**
     * Months of the event log kept (unset: all of it). Older monthly partitions are dropped by the
     * worker once the metric rollups cover them; at least 13 so every 365-day guard window is kept.
     */
    TOLLGATE_RETENTION_MONTHS: z.coerce
      .number()
      .int()
      .min(13, 'must be at least 13 (a 365-day guard window must stay in the log)')
      .max(1200)
      .optional(),
    /** Months of event partitions kept created ahead of now. */
    PARTITIONS_AHEAD_MONTHS: z.coerce.number().int().min(1).max(24).default(3),
    SHUTDOWN_GRACE_MS: durationMs.default(10_000),
    /** How long a guard reservation holds budget when its step event never arrives. */
    GUARD_RESERVATION_TTL_MS: durationMs.default(5 * 60_000),
    /**
     * Bounds the guard's own database work (lock waits and statements of a check's transaction).
     * Past it the transaction is rolled back and the caller is told the guard is busy.
     */
    GUARD_TIMEOUT_MS: durationMs.default(2000),
    /** How long a reserving check may wait in its scope's queue before it is answered busy. */
    GUARD_QUEUE_WAIT_MS: durationMs.default(1000),
    /** Reserving checks that may be queued on one scope key at once; past it, busy at once. */
    GUARD_QUEUE_MAX_PER_KEY: z.coerce.number().int().min(1).default(2048),
    /**
     * Queue prefix in Redis, so that several deployments (or test runs) can share one Redis. On a
     * Redis Cluster it must be hash-tagged (`{tollgate}`): a queue's keys must share one slot.
     */
    QUEUE_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9:_{}-]+$/)
      .refine((p) => /^[^{}]*(\{[^{}]+\}[^{}]*)?$/.test(p), 'a hash tag is one {…} with something inside')
      .default('tollgate'),
    /**
     * A Redis Cluster: comma-separated host:port of some of its nodes (REDIS_URL's credentials and
     * TLS apply to each). Set, the service connects with ioredis Cluster; unset, to REDIS_URL alone.
     */
    REDIS_CLUSTER_NODES: z
      .string()
      .transform((s) =>
        s
          .split(',')
          .map((h) => h.trim())
          .filter(Boolean),
      )
      .pipe(
        z
          .array(
            z.string().regex(/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9A-Fa-f:]+\]:\d{1,5}$/, 'each node must be host:port'),
          )
          .min(1, 'must name at least one node'),
      )
      .optional(),
    /** Encrypts exporter secrets at rest (any string of 32+ characters); needed once an exporter has secrets. */
    TOLLGATE_SECRET_KEY: z.string().min(32, 'must be at least 32 characters').optional(),
    /** How often the worker looks for exporter batches to flush (the flush-wait granularity). */
    EXPORTS_TICK_MS: durationMs.default(1000),
    /** BullMQ lock of a running export job: a crashed worker's batch is taken over after about this long. */
    EXPORTS_LOCK_MS: durationMs.min(1000).default(30_000),
    EXPORTS_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
    /** The most an exporter's timeoutMs may be: a request to a slow sink holds one of the EXPORTS_CONCURRENCY slots that long. */
    EXPORTS_MAX_TIMEOUT_MS: durationMs.min(100).max(120_000).default(10_000),
    /**
     * Exporter destinations allowed although they are not public (loopback, private, link-local, …):
     * comma-separated host names, IP addresses or CIDRs, e.g. `127.0.0.1,10.0.0.0/8` for a collector
     * on the same network. Everything else must resolve to public addresses only.
     */
    TOLLGATE_EXPORTER_ALLOW_HOSTS: z
      .string()
      .transform((s) =>
        s
          .split(',')
          .map((h) => h.trim())
          .filter(Boolean),
      )
      .pipe(
        z.array(
          z
            .string()
            .refine(isAllowHostEntry, 'each entry must be a host name, an IP address or a CIDR (address/prefix)'),
        ),
      )
      .default([]),
    /** When set, GET /metrics requires `Authorization: Bearer <METRICS_TOKEN>`. */
    METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    /** `on`: /metrics labels exporter series with project ids and exporter names (needs METRICS_TOKEN); `off`: summed over them. */
    METRICS_TENANT_LABELS: z.enum(['on', 'off']).default('off'),
    /** Failed authentications (wrong key, secret, admin or metrics token) one client address may make per AUTH_FAILURE_WINDOW_MS; past it 429. */
    AUTH_FAILURES_PER_ADDRESS: z.coerce.number().int().min(1).default(30),
    /** Failed authentications with one key id (a real key's id with a wrong secret) per AUTH_FAILURE_WINDOW_MS; past it 429. */
    AUTH_FAILURES_PER_KEY: z.coerce.number().int().min(1).default(10),
    AUTH_FAILURE_WINDOW_MS: durationMs.default(60_000),
    /**
     * The proxies in front of the API whose X-Forwarded-For is believed (a hop count, or addresses and
     * CIDRs separated by commas); unset, a client's address is the connection's.
     */
    TRUST_PROXY: z
      .string()
      .regex(
        /^(\d+|([0-9A-Fa-f:.\/]+|loopback|linklocal|uniquelocal)(\s*,\s*([0-9A-Fa-f:.\/]+|loopback|linklocal|uniquelocal))*)$/,
        'must be a hop count or a comma-separated list of addresses, CIDRs, loopback, linklocal or uniquelocal',
      )
      .optional(),
    /** A request whose headers and body have not all arrived after this long is answered 408 and closed. */
    HTTP_REQUEST_TIMEOUT_MS: durationMs.default(30_000),
    /**
     * Bytes of ingest bodies this process takes at once (arriving, parsed, validated, stored); a request
     * past it is answered 503 + Retry-After before its body is read. A MiB costs the event loop about
     * 0.1 s, and a readiness probe waits behind what is in flight: 4 MiB keeps that wait well under a second.
     */
    INGEST_MAX_IN_FLIGHT_BYTES: z.coerce
      .number()
      .int()
      .min(1)
      .default(4 * 1024 * 1024),
    /** Requests waiting for a pooled PostgreSQL connection past which ingest is answered 503 + Retry-After at once. */
    INGEST_MAX_POOL_WAITING: z.coerce.number().int().min(0).default(10),
    /** Requests per second each API key may make, summed over every API replica (Redis-backed); 0 turns the limit off. */
    RATE_LIMIT_PER_KEY_PER_SECOND: z.coerce.number().min(0).default(5000),
    /** Requests a key may make at once above its steady rate. */
    RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(10_000),
    /** Past this the limiter lets the request through: ingest must not wait on Redis. */
    RATE_LIMIT_REDIS_TIMEOUT_MS: durationMs.default(50),
  })
  .superRefine((c, ctx) => {
    // Project ids and exporter names are tenants' identifiers: never served to anyone who can reach the port.
    if (c.REDIS_CLUSTER_NODES && !/\{[^{}]+\}/.test(c.QUEUE_PREFIX))
      ctx.addIssue({
        code: 'custom',
        path: ['QUEUE_PREFIX'],
        message: "must be hash-tagged on a Redis Cluster (e.g. {tollgate}): BullMQ needs each queue's keys in one slot",
      });
    // An event accepted at ingest must land in a month that retention keeps.
    if (c.TOLLGATE_RETENTION_MONTHS !== undefined && c.INGEST_MAX_AGE_DAYS > (c.TOLLGATE_RETENTION_MONTHS - 1) * 28)
      ctx.addIssue({
        code: 'custom',
        path: ['INGEST_MAX_AGE_DAYS'],
        message: `must be at most ${(c.TOLLGATE_RETENTION_MONTHS - 1) * 28} with TOLLGATE_RETENTION_MONTHS=${c.TOLLGATE_RETENTION_MONTHS}`,
      });
    if (c.METRICS_TENANT_LABELS === 'on' && !c.METRICS_TOKEN)
      ctx.addIssue({
        code: 'custom',
        path: ['METRICS_TENANT_LABELS'],
        message: 'on needs METRICS_TOKEN (tenant labels are never served without a token)',
      });
  });

export type AppConfig = z.infer<typeof configSchema>;

export class ConfigError extends Error {}

/** Parses the environment; throws a ConfigError naming each bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const parsed = configSchema.safeParse(
    Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== '')),
  );
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}

/** Nest provider token-free access: the config is a class so it can be injected by type. */
export class Config {
  constructor(readonly values: AppConfig) {}
}

/** Every variable the service reads (the README's Configuration table lists each; a spec checks it). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(configSchema.shape);
