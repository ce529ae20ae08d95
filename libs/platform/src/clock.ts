import { Injectable } from '@nestjs/common';

/** The service's notion of now: one seam, so that window edges can be tested to the millisecond. */
@Injectable()
export class Clock {
  now(): Date {
    return new Date();
  }
}
