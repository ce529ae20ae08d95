/**
 * How the export jobs a worker runs at once (EXPORTS_CONCURRENCY) are shared between projects,
 * so that one tenant's slow sinks cannot hold every slot while another tenant's batches wait.
 *
 * A project may run up to its share, half the slots rounded up, at once. Past its share it may
 * borrow idle slots, but never the last free one: a project with nothing running always finds a
 * slot, at once, however slow the other projects' sinks are. A job refused here gives its slot
 * back and comes again a little later (the pipeline re-enqueues it), so the slot goes to the next
 * job in the queue. Counted per worker process: each process shares its own slots.
 */
export class ProjectShares {
  private readonly running = new Map<string, number>();
  private total = 0;
  readonly share: number;

  constructor(readonly capacity: number) {
    this.share = Math.ceil(capacity / 2);
  }

  /** A release function when the project may run one more job now; null when it must wait its turn. */
  tryEnter(projectId: string): (() => void) | null {
    const mine = this.running.get(projectId) ?? 0;
    if (mine >= this.share && this.total >= this.capacity - 1) return null;
    this.running.set(projectId, mine + 1);
    this.total++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.running.get(projectId) ?? 1) - 1;
      if (left > 0) this.running.set(projectId, left);
      else this.running.delete(projectId);
    };
  }

  runningFor(projectId: string): number {
    return this.running.get(projectId) ?? 0;
  }
}
