/** A budget policy as stored (a row of `policies`), as the guard and the alerts read it. */
export interface StoredPolicy {
  name: string;
  scope: string;
  window: string;
  max_cost_micros: number | null;
  max_total_tokens: number | null;
  max_input_tokens: number | null;
  max_output_tokens: number | null;
  warn_at_percent: number | null;
  strategy: 'block' | 'warn';
  /** null: as the request says. */
  on_exceed?: 'block' | 'shrink' | null;
  entity_name: string | null;
  cost_unit: string | null;
  /** Alert thresholds, percent of the limits (null or empty: none). */
  alerts: number[] | null;
  alert_hysteresis: number | null;
}
