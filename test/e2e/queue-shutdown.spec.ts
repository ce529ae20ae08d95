import { startService } from '../support/service';

/**
 * A service closed right after it started, its queues' Redis connections still opening: BullMQ
 * drops a closing connection's listeners, and the open it abandons then failed with an 'error'
 * nobody heard (an unhandled rejection: a crash, outside a test).
 */
describe('closing a service whose queues are still connecting (real Redis)', () => {
  it('closes without an unheard queue error', async () => {
    const unheard: unknown[] = [];
    const hear = (err: unknown) => unheard.push(err);
    process.on('unhandledRejection', hear);
    try {
      for (let i = 0; i < 5; i++) {
        const svc = await startService();
        await svc.close();
      }
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      process.off('unhandledRejection', hear);
    }
    expect(unheard.map(String)).toEqual([]);
  }, 60_000);
});
