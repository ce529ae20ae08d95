import { Client } from 'pg';
import { deadline } from './deadline';

/**
 * PostgreSQL readiness on one connection of its own, outside the pool: a pool exhausted by load is
 * a busy instance, not a broken one, and a load balancer must not take it out of rotation for that.
 * Concurrent probes share one query, so a flood of probes never queues on the connection; a probe
 * that fails or overruns drops the connection and the next one opens a new one.
 */
export class PostgresProbe {
  private client: Client | undefined;
  private connected: Promise<Client> | undefined;
  private inFlight: Promise<boolean> | undefined;

  constructor(private readonly url: string) {}

  check(timeoutMs: number): Promise<boolean> {
    this.inFlight ??= this.run(timeoutMs).finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  async close(): Promise<void> {
    const client = this.client;
    this.reset();
    await client?.end().catch(() => undefined);
  }

  private async run(timeoutMs: number): Promise<boolean> {
    const { expired, clear } = deadline(timeoutMs);
    try {
      const client = await Promise.race([this.connect(), expired]);
      await Promise.race([client.query('SELECT 1'), expired]);
      return true;
    } catch {
      // A connection that overran may still be busy (or half-open): never reuse it.
      const client = this.client;
      this.reset();
      void client?.end().catch(() => undefined);
      return false;
    } finally {
      clear();
    }
  }

  private connect(): Promise<Client> {
    if (this.connected) return this.connected;
    const client = new Client({
      connectionString: this.url,
      application_name: 'tollgate-readiness',
      connectionTimeoutMillis: 5000,
    });
    // A restart of PostgreSQL kills the idle connection: forget it; the next probe reconnects.
    client.on('error', () => this.client === client && this.reset());
    this.client = client;
    this.connected = client.connect().then(() => client);
    this.connected.catch(() => undefined);
    return this.connected;
  }

  private reset(): void {
    this.client = undefined;
    this.connected = undefined;
  }
}
