/**
 * `compute` with its results kept for the keys asked lately, all dropped at once when `max` are
 * held: for what the hot paths derive again and again from keys that repeat (statement names,
 * timestamp texts, lock ids), where a lookup is cheaper than the work and the garbage it makes.
 */
export function memoized<K, V>(max: number, compute: (key: K) => V): (key: K) => V {
  const kept = new Map<K, V>();
  return (key) => {
    let value = kept.get(key);
    if (value === undefined) {
      value = compute(key);
      if (kept.size >= max) kept.clear();
      kept.set(key, value);
    }
    return value;
  };
}
