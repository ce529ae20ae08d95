import { Client } from 'pg';

/**
 * A process-local cache of rows that rarely change (API keys, a project's policies and prices),
 * kept correct across API replicas by PostgreSQL LISTEN/NOTIFY: every change notifies the
 * channel with the key in the same transaction, and each process evicts it when the commit is
 * delivered. While the listening connection is down the cache is empty and bypassed, so a stale
 * row is never served for longer than a notification takes to arrive.
 */
export class NotifiedCache<V> {
  private readonly entries = new Map<string, { value: V; at: number }>();
  private client?: Client;
  private listening = false;
  private closed = false;
  /** Bumped by every eviction: a value read before it must not be stored after it. */
  private generation = 0;

  constructor(
    private readonly url: string,
    readonly channel: string,
    private readonly ttlMs = 60_000,
    private readonly maxEntries = 10_000,
  ) {}

  start(): void {
    void this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new Client({ connectionString: this.url, application_name: 'tollgate-cache' });
    const lost = () => {
      if (this.client !== client) return;
      this.listening = false;
      this.evictAll();
      this.client = undefined;
      client.end().catch(() => undefined);
      if (!this.closed) setTimeout(() => void this.connect(), 1000).unref();
    };
    this.client = client;
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (msg) => {
      if (msg.payload) this.evict(msg.payload);
      else this.evictAll();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
      this.evictAll();
      this.listening = true;
    } catch {
      lost();
    }
  }

  /** Reads through the cache; `load` runs when the key is absent, stale, or the cache is off. */
  async get(key: string, load: () => Promise<V>): Promise<V> {
    const hit = this.listening ? this.entries.get(key) : undefined;
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.value;
    const generation = this.generation;
    const value = await load();
    // Misses are not kept: a row created later is not announced.
    if (value !== null && value !== undefined && this.listening && generation === this.generation) {
      if (this.entries.size >= this.maxEntries) this.entries.clear();
      this.entries.set(key, { value, at: Date.now() });
    }
    return value;
  }

  evict(key: string): void {
    this.generation += 1;
    this.entries.delete(key);
  }

  evictAll(): void {
    this.generation += 1;
    this.entries.clear();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listening = false;
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }
}

/** The channels, and the statement that announces a change (run it in the changing transaction). */
export const CACHE_CHANNELS = { keys: 'tollgate_keys', projects: 'tollgate_projects' } as const;
export const notifySql = (channel: string) => `SELECT pg_notify('${channel}', $1)`;
