/** A cost as printed in messages: at most six decimals, no trailing zeros (0.0123, 5, 0.000001). */
export function formatCost(value: number): string {
  return String(Number(value.toFixed(6)));
}

/** Fills `{usage}` and `{limit}` (every occurrence) in a violation message template. */
export function formatViolationMessage(template: string, usage: number, limit: number): string {
  return template.replaceAll('{usage}', formatCost(usage)).replaceAll('{limit}', formatCost(limit));
}
