import { getQueueToken, WorkerHost } from '@nestjs/bullmq';
import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, ModuleRef } from '@nestjs/core';
import type { Queue, Worker } from 'bullmq';
import { Config } from '../config';
import { redisOutage } from '../logging/redis-outage';
import { RedisClient } from '../redis';
import { QUEUE_NAMES } from './queues';

/** How long a stopping process waits for its queues' Redis connections to finish opening. */
const OPENING_WAIT_MS = 2_000;

/**
 * A BullMQ queue whose Redis goes away emits 'error'; unheard, that event crashes the process.
 * Redis carries only queues (the log is in PostgreSQL), so losing it is logged, not fatal.
 */
@Injectable()
export class QueueErrors implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('queues');
  private lastLogged = 0;
  private readonly heard = new WeakSet<Worker>();
  private readonly emitters: (Queue | Worker)[] = [];

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
      this.emitters.push(queue);
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
   * Queues and workers are closed on shutdown. One closed while its Redis connection is still
   * opening drops its listeners, and the abandoned open then fails with an 'error' that nobody
   * hears (an unhandled rejection: a process that starts and stops at once crashed on the way
   * out). Their connections finish opening first, within OPENING_WAIT_MS (Redis down: no wait
   * past it, and no open to abandon that could succeed).
   */
  async beforeApplicationShutdown(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, OPENING_WAIT_MS)));
    const opened = Promise.all(this.emitters.map((e) => e.waitUntilReady().catch(() => undefined)));
    await Promise.race([opened, waited]);
    clearTimeout(timer);
    await endOpeningConnections(this.emitters);
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
      this.emitters.push(worker);
      worker.on('error', (err) => {
        if (redisOutage.failed(err, `worker ${worker.name}`)) return;
        this.logger.warn({ msg: 'queue worker error', queue: worker.name, error: err.message });
      });
    }
  }
}

/** What BullMQ keeps of a queue's or worker's Redis connections (not in its public types). */
interface BullConnection {
  /** The connection's opening: settled once it is ready, or has ended. */
  readonly client: Promise<unknown>;
  readonly _client?: { status: string; disconnect(): void };
}

/**
 * Ends the Redis connections of `emitters` still trying to open (Redis unreachable) while their
 * errors are still heard: one waiting to retry is stopped; one in the middle of an attempt is
 * ended, and its opening given up to `waitMs` to settle. BullMQ, closing a connection caught in
 * the middle of an attempt, first drops its listeners; the attempt then fails and the
 * connection's opening re-emits that failure as an 'error' nobody hears — an unhandled rejection
 * ("connect ECONNREFUSED"), which crashed a service stopped while its Redis was down, or failed
 * whichever test was running.
 */
export async function endOpeningConnections(emitters: readonly (Queue | Worker)[], waitMs = 1_000): Promise<void> {
  const attempts: Promise<unknown>[] = [];
  for (const e of emitters) {
    const { connection, blockingConnection } = e as unknown as Record<string, BullConnection | undefined>;
    for (const c of [connection, blockingConnection]) {
      const client = c?._client;
      if (!c || !client || (client.status !== 'connecting' && client.status !== 'reconnecting')) continue;
      // A retry still waiting is cancelled and leaves nothing to fail; an attempt under way fails
      // (or opens) and then ends, which settles the opening.
      if (client.status === 'connecting') attempts.push(c.client.catch(() => undefined));
      client.disconnect();
    }
  }
  if (!attempts.length) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(attempts), new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
  clearTimeout(timer);
}
