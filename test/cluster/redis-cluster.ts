import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';

/**
 * A throwaway Redis Cluster on loopback: six redis-server processes (cluster-enabled, no
 * persistence) joined by `redis-cli --cluster create --cluster-replicas 1`: three masters, each
 * with one replica. The machine's Redis (6379) is never touched.
 */
export interface RedisClusterHandle {
  ports: number[];
  /** `127.0.0.1:7001,…` as REDIS_CLUSTER_NODES takes it. */
  nodes: string;
  cli(port: number, ...args: string[]): string;
  /** The port of the master serving `slot` now. */
  masterOf(slot: number): number;
  /** Kills one node's process (SIGKILL). */
  kill(port: number): void;
  alive(port: number): boolean;
  destroy(): void;
}

function cli(port: number, ...args: string[]): string {
  const r = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (r.status !== 0) throw new Error(`redis-cli -p ${port} ${args.join(' ')}: ${r.stdout}${r.stderr}`);
  return r.stdout.trim();
}

async function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    try {
      if (await check()) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export async function startRedisCluster(firstPort = 7001): Promise<RedisClusterHandle> {
  const ports = Array.from({ length: 6 }, (_, i) => firstPort + i);
  for (const port of ports)
    if (await portAnswers(port))
      throw new Error(`port ${port} is in use: the cluster test needs ${ports[0]}-${ports[5]} free`);
  const dir = mkdtempSync('/tmp/tollgate-redis-cluster-');
  const procs = new Map<number, ChildProcess>();
  const handle: RedisClusterHandle = {
    ports,
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    cli,
    masterOf(slot: number): number {
      // CLUSTER NODES: id, address, flags, master, ping, pong, epoch, link state, then its slot ranges.
      const out = cli(
        ports.find((p) => handle.alive(p))!,
        'cluster',
        'nodes',
      );
      for (const line of out.split('\n')) {
        const f = line.split(' ');
        if (!f[2]?.includes('master') || f[2].includes('fail')) continue;
        for (const range of f.slice(8)) {
          const [a, b] = range.split('-').map(Number);
          if (slot >= a && slot <= (b ?? a)) return Number(f[1].split(':')[1].split('@')[0]);
        }
      }
      throw new Error(`no live master serves slot ${slot}`);
    },
    kill(port: number) {
      procs.get(port)?.kill('SIGKILL');
      procs.delete(port);
    },
    alive: (port: number) => procs.has(port),
    destroy() {
      for (const p of procs.values()) p.kill('SIGKILL');
      procs.clear();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    for (const port of ports) {
      const p = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout',
          '2000',
          // A replica syncs at once (Redis 7 waits 5 s by default to gather replicas for a diskless sync).
          '--repl-diskless-sync-delay',
          '0',
          '--save',
          '',
          '--appendonly',
          'no',
          '--dir',
          dir,
          '--protected-mode',
          'no',
        ],
        { stdio: 'ignore' },
      );
      procs.set(port, p);
      p.on('exit', () => procs.get(port) === p && procs.delete(port));
    }
    await until(
      async () => (await Promise.all(ports.map(portAnswers))).every(Boolean),
      'the six redis-server processes',
    );
    cli(
      ports[0],
      '--cluster',
      'create',
      ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    );
    await until(
      () => ports.every((p) => cli(p, 'cluster', 'info').includes('cluster_state:ok')),
      'cluster_state:ok on every node',
    );
    // A replica that never synced cannot take over (its data would be too old): the failover test
    // kills a master, so every replica has its link up first.
    await until(
      () =>
        ports.every((p) => {
          const info = cli(p, 'info', 'replication');
          return info.includes('role:master') || info.includes('master_link_status:up');
        }),
      'every replica synced with its master',
    );
    return handle;
  } catch (err) {
    handle.destroy();
    throw err;
  }
}

export { until };
