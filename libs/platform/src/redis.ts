import { Injectable, OnModuleDestroy } from '@nestjs/common';
import IORedis, { type RedisOptions } from 'ioredis';
import { Config, type AppConfig } from './config';

/** Connection options for BullMQ and our own Redis client, from REDIS_URL. */
export function redisOptions(config: AppConfig): RedisOptions {
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

/** A small client for health checks and counters; fails fast instead of queueing commands while Redis is down. */
@Injectable()
export class RedisClient implements OnModuleDestroy {
  readonly redis: IORedis;

  constructor(config: Config) {
    this.redis = new IORedis({ ...redisOptions(config.values), maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: false });
    this.redis.on('error', () => undefined);
  }

  async ping(timeoutMs = 1000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), timeoutMs)));
    try {
      // Commands fail at once while the connection is (re)established; wait for it within the budget.
      const ready = this.redis.status === 'ready' ? Promise.resolve() : new Promise<void>((resolve) => this.redis.once('ready', () => resolve()));
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
