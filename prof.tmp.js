require('reflect-metadata');
const { PrismaService } = require('./dist/libs/database/src');
const { buildQuery, rollupLevels } = require('./dist/libs/metrics/src/query/metric-query');
const sqlmod = require('./dist/libs/metrics/src/query/metric-query.sql');
(async () => {
  const prisma = new PrismaService('postgresql://postgres@127.0.0.1:5432/tollgate_bench_metrics', 2);
  const fake = { $queryRawUnsafe: async (sql, ...v) => { const r = await prisma.pool.query('EXPLAIN (ANALYZE, BUFFERS) ' + sql, v); console.log(r.rows.map(x => x['QUERY PLAN']).join('\n')); return [{ rows: [], lag_events: 0, lag_ms: 0 }]; } };
  const q = buildQuery('bench-project', ['mastra_model_total_input_tokens','mastra_model_total_output_tokens'], { timestamp: { start: new Date(Date.now() - 30*86400000) } }, {});
  await sqlmod.aggregateRecords(fake, q, rollupLevels(q));
  await prisma.onModuleDestroy();
})();
