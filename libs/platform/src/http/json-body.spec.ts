import { findJsonStructureProblem } from './json-body';

describe('findJsonStructureProblem', () => {
  it('names a key given twice, at any depth, also when one spelling is escaped', () => {
    expect(findJsonStructureProblem('{"a":1,"a":2}')).toEqual({ field: 'a', reason: 'is given twice in one object' });
    expect(findJsonStructureProblem('{"events":[{"usage":{"inputTokens":1,"inputTokens":1}}]}')?.field).toBe(
      'events[0].usage.inputTokens',
    );
    expect(findJsonStructureProblem('{"events":[{},{"x":1,"\\u0078":2}]}')?.field).toBe('events[1].x');
  });

  it('accepts the same key in different objects, and keys inside strings', () => {
    expect(findJsonStructureProblem('{"a":{"a":1},"b":[{"a":1},{"a":"\\"a\\":"}]}')).toBeNull();
  });

  it('names a __proto__ or constructor.prototype key, escaped or not', () => {
    expect(findJsonStructureProblem('{"filters":{"labels":{"__proto__":"x"}}}')).toEqual({
      field: 'filters.labels.__proto__',
      reason: 'is not accepted as a key (it names an object prototype)',
    });
    expect(findJsonStructureProblem('{"events":[{"\\u005f_proto__":{}}]}')?.field).toBe('events[0].__proto__');
    expect(findJsonStructureProblem('{"a":{"constructor":{"prototype":{}}}}')?.field).toBe('a.constructor.prototype');
    expect(findJsonStructureProblem('{"constructor":"x","prototype":1,"toString":[{"prototype":1}]}')).toBeNull();
  });

  it('names where nesting goes past the limit', () => {
    expect(findJsonStructureProblem(`{"a":${'['.repeat(40)}${']'.repeat(40)}}`, 32)).toEqual({
      field: `a${'[0]'.repeat(31)}`,
      reason: 'nests deeper than 32 levels',
    });
    expect(findJsonStructureProblem(`${'['.repeat(32)}${']'.repeat(32)}`, 32)).toBeNull();
  });
});
