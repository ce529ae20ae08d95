import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { deadline } from './deadline';

describe('deadline', () => {
  it('rejects after the time when nothing answers', async () => {
    const started = Date.now();
    await expect(deadline(50).expired).rejects.toThrow('no answer within 50 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('lets an answer that arrived while the event loop was blocked win, though the timer is due as well', async () => {
    // `cat` answers at once, from its own process; this one is busy for 200 ms meanwhile.
    const cat = spawn('cat', [], { stdio: ['pipe', 'pipe', 'ignore'] });
    await once(cat, 'spawn');
    try {
      const { expired, clear } = deadline(20);
      const answer = once(cat.stdout!, 'data').then(([d]) => String(d));
      cat.stdin!.write('pong');
      const blockUntil = Date.now() + 200;
      while (Date.now() < blockUntil);
      await expect(Promise.race([answer, expired])).resolves.toBe('pong');
      clear();
      // A plain timer, for contrast, would have called it late.
    } finally {
      cat.kill();
    }
  });
});
