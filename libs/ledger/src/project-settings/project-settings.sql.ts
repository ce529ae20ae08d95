import type { Sql } from '@tollgate/database';
import type { PriceOverrideRate } from '../pricing/price-step';
import type { FallbackRate, GuardSettings } from '../budgets/guard-decision';
import type { StoredPolicy } from '../budgets/stored-policy';

export interface ProjectSettings extends GuardSettings {
  /** Days back this project accepts events; null: the operator's INGEST_MAX_AGE_DAYS. */
  maxEventAgeDays: number | null;
  policies: StoredPolicy[];
  overrides: PriceOverrideRate[];
  /** Some budget of the project has alerted (a fired or re-armed state exists): commits look at those states. */
  alertStates?: boolean;
  /** The scopes (`resource`, …) on which a check's request limit registered alert thresholds. */
  requestAlertScopes?: string[];
}

/** Everything a check needs to know about its project, in one round trip. */
export async function readProjectSettings(db: Sql, projectId: string): Promise<ProjectSettings | null> {
  const [row] = await db.query<{
    unpriced_policy: GuardSettings['unpricedPolicy'];
    unpriced_fallback: FallbackRate | null;
    cost_unit: string;
    exchange_rates: Record<string, number>;
    max_event_age_days: number | null;
    policies: StoredPolicy[];
    overrides: any[];
    alert_states: boolean;
    request_alert_scopes: string[];
  }>(
    `SELECT p.unpriced_policy, p.unpriced_fallback, p.cost_unit, p.exchange_rates, p.max_event_age_days,
            coalesce((SELECT jsonb_agg(to_jsonb(pol)) FROM policies pol WHERE pol.project_id = p.id), '[]'::jsonb) AS policies,
            coalesce((SELECT jsonb_agg(to_jsonb(o)) FROM price_overrides o WHERE o.project_id = p.id), '[]'::jsonb) AS overrides,
            EXISTS (SELECT 1 FROM budget_alert_states s WHERE s.project_id = p.id) AS alert_states,
            coalesce((SELECT array_agg(DISTINCT split_part(s.scope_key, ':', 1)) FROM budget_alert_states s
                       WHERE s.project_id = p.id AND s.kind = 'threshold' AND s.source = 'request'), '{}') AS request_alert_scopes
       FROM projects p WHERE p.id = $1`,
    projectId,
  );
  if (!row) return null;
  return {
    unpricedPolicy: row.unpriced_policy,
    fallback: row.unpriced_fallback
      ? { ...row.unpriced_fallback, currency: row.unpriced_fallback.currency ?? row.cost_unit }
      : null,
    money: { base: row.cost_unit, rates: row.exchange_rates },
    maxEventAgeDays: row.max_event_age_days,
    policies: row.policies,
    alertStates: row.alert_states,
    requestAlertScopes: row.request_alert_scopes,
    overrides: row.overrides.map((o) => ({
      id: o.id,
      provider: o.provider,
      model: o.model,
      effectiveFrom: new Date(o.effective_from),
      currency: o.currency,
      inputPerMillion: Number(o.input_per_million),
      outputPerMillion: Number(o.output_per_million),
      cacheReadPerMillion: o.cache_read_per_million === null ? null : Number(o.cache_read_per_million),
      cacheWritePerMillion: o.cache_write_per_million === null ? null : Number(o.cache_write_per_million),
      cacheWrite1hPerMillion: o.cache_write_1h_per_million == null ? null : Number(o.cache_write_1h_per_million),
    })),
  };
}
