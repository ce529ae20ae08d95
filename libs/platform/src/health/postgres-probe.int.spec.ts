import { createServer, type Server, type Socket } from 'node:net';
import { Client, Pool } from 'pg';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { PostgresProbe } from './postgres-probe';

describe('PostgresProbe (readiness on its own connection)', () => {
  it('answers while every pooled connection is busy, on one connection however many probes come at once', async () => {
    const pool = new Pool({ connectionString: TEST_DATABASE_URL, max: 2, connectionTimeoutMillis: 200 });
    const probe = new PostgresProbe(TEST_DATABASE_URL);
    try {
      const busy = Promise.all([pool.query('SELECT pg_sleep(1.5)'), pool.query('SELECT pg_sleep(1.5)')]);
      await new Promise((r) => setTimeout(r, 100));
      await expect(pool.query('SELECT 1')).rejects.toThrow(/timeout/);
      const queries = jest.spyOn(Client.prototype, 'query');
      expect(await Promise.all(Array.from({ length: 20 }, () => probe.check(1000)))).toEqual(Array(20).fill(true));
      expect(queries).toHaveBeenCalledTimes(1);
      queries.mockRestore();
      await busy;
    } finally {
      await probe.close();
      await pool.end();
    }
  });

  it('says down within its timeout when the server accepts but never answers', async () => {
    const sockets: Socket[] = [];
    const silent: Server = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as { port: number };
    const probe = new PostgresProbe(`postgresql://postgres@127.0.0.1:${port}/none`);
    try {
      const started = Date.now();
      expect(await probe.check(300)).toBe(false);
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      await probe.close();
      sockets.forEach((s) => s.destroy());
      await new Promise((r) => silent.close(r));
    }
  });

  it('opens a new connection after PostgreSQL dropped its connection', async () => {
    const probe = new PostgresProbe(TEST_DATABASE_URL);
    const admin = new Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    try {
      expect(await probe.check(1000)).toBe(true);
      const pid = (probe as unknown as { client: { processID: number } }).client.processID;
      expect((await admin.query('SELECT pg_terminate_backend($1) AS killed', [pid])).rows[0].killed).toBe(true);
      await new Promise((r) => setTimeout(r, 100));
      expect(await probe.check(1000)).toBe(true);
    } finally {
      await admin.end();
      await probe.close();
    }
  });
});
