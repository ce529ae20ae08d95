import IORedis, { Cluster } from 'ioredis';
import { loadConfig } from './config';
import { counterPrefix, createRedis, queueConnection } from './redis';

describe('Redis Cluster settings', () => {
  it('refuses a cluster without a hash-tagged queue prefix, and a malformed tag or node', () => {
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7001' })).toThrow(
      "QUEUE_PREFIX: must be hash-tagged on a Redis Cluster (e.g. {tollgate}): BullMQ needs each queue's keys in one slot",
    );
    expect(() => loadConfig({ QUEUE_PREFIX: '{a}{b}' })).toThrow(
      'QUEUE_PREFIX: a hash tag is one {…} with something inside',
    );
    expect(() => loadConfig({ QUEUE_PREFIX: '{}' })).toThrow(
      'QUEUE_PREFIX: a hash tag is one {…} with something inside',
    );
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1', QUEUE_PREFIX: '{t}' })).toThrow(
      'REDIS_CLUSTER_NODES.0: each node must be host:port',
    );
  });

  it('connects with ioredis Cluster to the nodes when they are set, else to REDIS_URL alone', () => {
    const config = loadConfig({
      REDIS_CLUSTER_NODES: '127.0.0.1:7001, [::1]:7002',
      QUEUE_PREFIX: '{tollgate}',
      REDIS_URL: 'redis://:s3cret@127.0.0.1:7001',
    });
    const cluster = createRedis(config, { lazyConnect: true }) as Cluster;
    expect(cluster).toBeInstanceOf(Cluster);
    expect((cluster as unknown as { startupNodes: unknown }).startupNodes).toEqual([
      { host: '127.0.0.1', port: 7001 },
      { host: '::1', port: 7002 },
    ]);
    expect(cluster.options.redisOptions).toMatchObject({ password: 's3cret', maxRetriesPerRequest: null });
    cluster.disconnect();
    const single = createRedis(loadConfig({}), { lazyConnect: true });
    expect(single).toBeInstanceOf(IORedis);
    single.disconnect();
    expect(queueConnection(loadConfig({}))).toMatchObject({ host: '127.0.0.1', port: 6379 });
  });

  it("keeps the rate-limit counters out of the queues' hash tag", () => {
    expect(counterPrefix(loadConfig({ QUEUE_PREFIX: '{tollgate}' }))).toBe('tollgate');
    expect(counterPrefix(loadConfig({ QUEUE_PREFIX: 'plain' }))).toBe('plain');
  });
});
