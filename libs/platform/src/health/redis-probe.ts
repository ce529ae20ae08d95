import type { Cluster, default as IORedis } from 'ioredis';
import { deadline } from './deadline';

/** Redis answers PING within `timeoutMs` (waiting for a connection being re-established, within the same budget). */
export async function redisAnswers(redis: IORedis | Cluster, timeoutMs: number): Promise<boolean> {
  const { expired, clear } = deadline(timeoutMs);
  let onReady: (() => void) | undefined;
  try {
    // Commands fail at once while the connection is (re)established (no offline queue).
    const ready =
      redis.status === 'ready'
        ? Promise.resolve()
        : new Promise<void>((resolve) => redis.once('ready', (onReady = resolve)));
    return (await Promise.race([ready.then(() => redis.ping()), expired])) === 'PONG';
  } catch {
    return false;
  } finally {
    clear();
    if (onReady) redis.off('ready', onReady);
  }
}
