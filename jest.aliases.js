/** The @tollgate/* path aliases for jest (shared by every jest project), read from tsconfig.paths.json: the one place they are written. */
const { compilerOptions } = require('./tsconfig.paths.json');

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

module.exports = Object.fromEntries(
  Object.entries(compilerOptions.paths).map(([alias, [target]]) => [
    `^${escape(alias)}$`,
    `<rootDir>/${target.replace(/^\.\//, '')}`,
  ]),
);
