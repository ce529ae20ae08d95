import { getQueueToken, WorkerHost } from '@nestjs/bullmq';
import { Injectable, Logger, OnApplicationBootstrap, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, ModuleRef } from '@nestjs/core';
import type { Queue, Worker } from 'bullmq';
import { Config } from '../config';
import { redisOutage } from '../logging/redis-outage';
import { RedisClient } from '../redis';
import { QUEUE_NAMES } from './queues';

/**
 * A BullMQ queue whose Redis goes away emits 'error'; unheard, that event crashes the process.
 * Redis carries only queues (the log is in PostgreSQL), so losing it is logged, not fatal.
 */
@Injectable()
export class QueueErrors implements OnModuleInit, OnApplicationBootstrap {
  private readonly logger = new Logger('queues');
  private lastLogged = 0;
  private readonly heard = new WeakSet<Worker>();

  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly discovery: DiscoveryService,
    private readonly redis: RedisClient,
    private readonly config: Config,
  ) {}

  onModuleInit(): void {
    // The process's own client reconnects for ever: its errors and its 'ready' tell when Redis
    // goes and when it is back.
    redisOutage.watch(this.config.values.REDIS_URL);
    this.redis.redis.on('error', (err: Error) => redisOutage.failed(err, 'redis'));
    this.redis.redis.on('ready', () => redisOutage.ready());
    this.hearWorkers();
    for (const name of QUEUE_NAMES) {
      const queue = this.moduleRef.get<Queue>(getQueueToken(name), { strict: false });
      queue.on('error', (err) => {
        // Redis gone: said once, by the outage watcher, not once per queue per reconnection.
        if (redisOutage.failed(err, `queue ${name}`)) return;
        if (Date.now() - this.lastLogged < 5000) return;
        this.lastLogged = Date.now();
        this.logger.warn({ msg: 'queue connection error', queue: name, error: err.message });
      });
    }
  }

  onApplicationBootstrap(): void {
    this.hearWorkers();
  }

  /**
   * A @Processor's worker with no 'error' listener has BullMQ print each error's raw stack to
   * stderr (18 of them in a short Redis outage); each is heard here instead.
   */
  private hearWorkers(): void {
    for (const wrapper of this.discovery.getProviders()) {
      const host = wrapper.instance as unknown;
      if (!(host instanceof WorkerHost)) continue;
      let worker: Worker;
      try {
        worker = host.worker;
      } catch {
        continue; // not registered yet: heard at bootstrap
      }
      if (this.heard.has(worker)) continue;
      this.heard.add(worker);
      worker.on('error', (err) => {
        if (redisOutage.failed(err, `worker ${worker.name}`)) return;
        this.logger.warn({ msg: 'queue worker error', queue: worker.name, error: err.message });
      });
    }
  }
}
