import { getQueueToken } from '@nestjs/bullmq';
import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { Queue } from 'bullmq';
import { QUEUE_NAMES } from './queues';

/**
 * A BullMQ queue whose Redis goes away emits 'error'; unheard, that event crashes the process.
 * Redis carries only queues (the log is in PostgreSQL), so losing it is logged, not fatal.
 */
@Injectable()
export class QueueErrors implements OnModuleInit {
  private readonly logger = new Logger('queues');
  private lastLogged = 0;

  constructor(private readonly moduleRef: ModuleRef) {}

  onModuleInit(): void {
    for (const name of QUEUE_NAMES) {
      const queue = this.moduleRef.get<Queue>(getQueueToken(name), { strict: false });
      queue.on('error', (err) => {
        if (Date.now() - this.lastLogged < 5000) return;
        this.lastLogged = Date.now();
        this.logger.warn({ msg: 'queue connection error', queue: name, error: err.message });
      });
    }
  }
}
