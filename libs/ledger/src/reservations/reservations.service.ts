import { Injectable } from '@nestjs/common';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { AppError } from '@tollgate/platform';
import { closeReservations, readReservation, type ClosedReservation } from './release-reservation.sql';

/** Releasing a reservation by hand, and lapsing the expired ones. */
@Injectable()
export class ReservationsService {
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

  /** Marks expired reservations lapsed (they already stopped counting at expiry) and logs it. */
  async sweep(now = new Date()): Promise<number> {
    await this.partitions.ensureFor([now]);
    return (await closeReservations(this.prisma.sql, { expiredBefore: now }, 'lapsed')).length;
  }
}
