import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';

/** A stopping process says why and when it is done (with `enableShutdownHooks`, on SIGTERM/SIGINT). */
@Injectable()
export class ShutdownLog implements BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('shutdown');
  private started = 0;

  beforeApplicationShutdown(signal?: string): void {
    this.started = Date.now();
    this.logger.log({ msg: 'shutting down: finishing what is in flight', ...(signal ? { signal } : {}) });
  }

  onApplicationShutdown(signal?: string): void {
    this.logger.log({ msg: 'stopped', ...(signal ? { signal } : {}), ms: Date.now() - this.started });
  }
}
