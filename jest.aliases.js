/** The @tollgate/* path aliases of tsconfig.json, for jest (shared by every jest project). */
module.exports = {
  '^@tollgate/(contracts|database|ledger|platform|exporters|observability|metrics)$': '<rootDir>/libs/$1/src/index.ts',
  '^@tollgate/observability/metrics$': '<rootDir>/libs/observability/src/metrics.ts',
  '^@tollgate/sdk(/mastra)?$': '<rootDir>/libs/sdk/src$1/index.ts',
};
