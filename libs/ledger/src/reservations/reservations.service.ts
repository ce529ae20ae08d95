import { Injectable } from '@nestjs/common';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { AppError } from '@tollgate/platform';
import { closeReservations, readReservation, type ClosedReservation } from './release-reservation.sql';

/**
 * Every FULL_SWEEP_EVERY-th sweep of a process looks at every expired reservation, from the
 * beginning: the net under the sweeps that start where the last one stopped (a reservation made
 * by a replica whose clock runs more than a TTL behind could expire before that).
 */
const FULL_SWEEP_EVERY = 120;

/** Releasing a reservation by hand, and lapsing the expired ones. */
@Injectable()
export class ReservationsService {
  /** Where this process's last sweep stopped: every reservation expired by then is closed. */
  private sweptUntil: Date | undefined;
  private sweeps = 0;

  constructor(
    private readonly prisma: PrismaService,
    private readonly partitions: EventPartitions,
  ) {}

  /** Idempotent: releasing a closed reservation answers its current state. */
  async release(projectId: string, id: string): Promise<ClosedReservation> {
    await this.partitions.ensureFor([new Date()]);
    await closeReservations(this.prisma.sql, { projectId, id }, 'released');
    const state = await readReservation(this.prisma.sql, projectId, id);
    if (!state) throw new AppError('not_found', `No reservation ${id} in this project`, 'id');
    return state;
  }

  /**
   * Marks expired reservations lapsed (they already stopped counting at expiry) and logs it.
   * Those it lapsed, and those their steps settled, keep their entries in the index of open
   * expiries until VACUUM: a sweep looks only past where the last one stopped, so that it does
   * not walk the guard's whole history every 30 s when autovacuum is off or late.
   */
  async sweep(now = new Date()): Promise<number> {
    await this.partitions.ensureFor([now]);
    const after = this.sweeps++ % FULL_SWEEP_EVERY === 0 ? undefined : this.sweptUntil;
    const lapsed = await closeReservations(this.prisma.sql, { expiredBefore: now, expiredAfter: after }, 'lapsed');
    if (!this.sweptUntil || now > this.sweptUntil) this.sweptUntil = now;
    return lapsed.length;
  }
}
