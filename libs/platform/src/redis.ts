import { Injectable, OnApplicationShutdown, OnModuleDestroy } from '@nestjs/common';
import IORedis, { Cluster, type RedisOptions } from 'ioredis';
import { Config, type AppConfig } from './config';

/** Connection options for BullMQ and our own Redis client, from REDIS_URL; they always retry. */
export function redisOptions(config: AppConfig): RedisOptions & { retryStrategy: (times: number) => number } {
  const url = new URL(config.REDIS_URL);
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    username: url.username || undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    db: url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0,
    tls: url.protocol === 'rediss:' ? {} : undefined,
    // BullMQ workers need this; it also means a command waits for Redis to come back.
    maxRetriesPerRequest: null,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  };
}

/** The nodes of REDIS_CLUSTER_NODES as ioredis takes them. */
function clusterNodes(config: AppConfig): { host: string; port: number }[] {
  return (config.REDIS_CLUSTER_NODES ?? []).map((n) => {
    const at = n.lastIndexOf(':');
    return { host: n.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(n.slice(at + 1)) };
  });
}

/**
 * A new connection to Redis with `overrides` on top of redisOptions: an ioredis Cluster when
 * REDIS_CLUSTER_NODES is set (it follows slot moves and failovers itself), else one IORedis.
 */
export function createRedis(config: AppConfig, overrides: RedisOptions = {}): IORedis | Cluster {
  const { host: _host, port: _port, db: _db, retryStrategy, ...node } = { ...redisOptions(config), ...overrides };
  if (!config.REDIS_CLUSTER_NODES) return new IORedis({ ...redisOptions(config), ...overrides });
  return new Cluster(clusterNodes(config), {
    redisOptions: node,
    enableOfflineQueue: overrides.enableOfflineQueue ?? true,
    lazyConnect: overrides.lazyConnect,
    // Reconnect for ever (as the single-node client does); a failover is picked up from the slot map.
    clusterRetryStrategy: (times) => (retryStrategy ? (retryStrategy(times) as number) : Math.min(times * 200, 2000)),
    // No CLUSTER INFO ready check: while a failover is under way cluster_state is `fail`, and a
    // failed check makes ioredis reconnect inside connect(), dropping that call's promise for good.
    // BullMQ's worker awaits connect() when it re-opens its blocking connection, so the exports
    // worker stopped taking jobs after a master was killed (test/cluster). Commands sent while
    // the cluster is down are retried (retryDelayOnClusterDown) instead.
    enableReadyCheck: false,
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 300,
    retryDelayOnTryAgain: 200,
    slotsRefreshTimeout: 2000,
  });
}

/**
 * What BullMQ connects with: options (it opens its own connections) on one Redis; on a Redis
 * Cluster one Cluster client, shared by the queues (each worker duplicates it for its blocking
 * reads). The caller closes a Cluster it got: BullMQ does not close a connection it was given.
 */
export function queueConnection(config: AppConfig): ReturnType<typeof redisOptions> | Cluster {
  return config.REDIS_CLUSTER_NODES
    ? (createRedis(config, { maxRetriesPerRequest: null }) as Cluster)
    : redisOptions(config);
}

/** The queues' shared connection; a Cluster client is closed after everything using it has stopped. */
export class QueueConnection implements OnApplicationShutdown {
  constructor(readonly connection: RedisOptions | Cluster) {}

  onApplicationShutdown(): void {
    if (this.connection instanceof Cluster) this.connection.disconnect();
  }
}

/**
 * Key prefix for single-key counters (rate limits): the queue prefix without its hash tag, so that
 * on a cluster those keys spread over the slots instead of all landing on the queues' one.
 */
export function counterPrefix(config: AppConfig): string {
  return config.QUEUE_PREFIX.replace(/[{}]/g, '');
}

/** A small client for health checks and counters; fails fast instead of queueing commands while Redis is down. */
@Injectable()
export class RedisClient implements OnModuleDestroy {
  readonly redis: IORedis | Cluster;

  constructor(config: Config) {
    this.redis = createRedis(config.values, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: false });
    this.redis.on('error', () => undefined);
  }

  async ping(timeoutMs = 1000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), timeoutMs)),
    );
    try {
      // Commands fail at once while the connection is (re)established; wait for it within the budget.
      const ready =
        this.redis.status === 'ready'
          ? Promise.resolve()
          : new Promise<void>((resolve) => this.redis.once('ready', () => resolve()));
      const reply = await Promise.race([ready.then(() => this.redis.ping()), timeout]);
      return reply === 'PONG';
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  async onModuleDestroy(): Promise<void> {
    this.redis.disconnect();
  }
}
