/** What tells the two names of the guard apart: Mastra's ids and texts for each. */
export interface CostGuardLabels<Id extends string> {
  id: Id;
  name: string;
  className: string;
  defaultMessage: string;
  softMessage: (percent: number, usage: string, limit: string) => string;
}

export const COST_GUARD: CostGuardLabels<'cost-guard'> = {
  id: 'cost-guard',
  name: 'Cost Guard',
  className: 'CostGuardProcessor',
  defaultMessage: 'Cost guard: cost limit exceeded ({usage}/{limit})',
  softMessage: (percent, usage, limit) => `Cost guard: cost reached ${percent}% of the limit (${usage}/${limit})`,
};

export const TOKEN_COST_CONTROL: CostGuardLabels<'token-cost-control'> = {
  id: 'token-cost-control',
  name: 'Token Cost Control',
  className: 'TokenCostControl',
  defaultMessage: 'Cost control: estimated cost limit exceeded ({usage}/{limit})',
  softMessage: (percent, usage, limit) =>
    `Cost control: estimated cost reached ${percent}% of the limit (${usage}/${limit})`,
};
