// The routes the SDK uses, called with the read key kept in this tab's session storage.
const KEY = 'tollgate.readKey';

export const session = {
  get key() {
    return sessionStorage.getItem(KEY);
  },
  set key(v) {
    if (v) sessionStorage.setItem(KEY, v);
    else sessionStorage.removeItem(KEY);
  },
};

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message ?? body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

let lagListener = () => {};
export const onLag = (fn) => {
  lagListener = fn;
};

export async function api(method, path, body, key = session.key) {
  const res = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) throw new ApiError(res.status, data);
  if (data && data.lag) lagListener(data.lag);
  return data;
}

const M = '/api/observability/metrics/';
export const metrics = {
  aggregate: (args) => api('POST', M + 'aggregate', args),
  breakdown: (args) => api('POST', M + 'breakdown', args),
  timeseries: (args) => api('POST', M + 'timeseries', args),
};
export const discovery = (what) => api('GET', `/api/observability/discovery/${what}`);

/** Input + output totals: their sum is the step's tokens and their estimatedCost its whole cost, once. */
export const TOKENS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];
/** Every step produces exactly one total-input record, so its count is the number of steps. */
export const STEPS = ['mastra_model_total_input_tokens'];

/** Query string of the defined values. */
const qs = (params) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
};

/** The ledger's own step events (GET /v1/steps), a run's timeline and latency percentiles per model. */
export const steps = {
  list: (params) => api('GET', `/v1/steps${qs(params)}`),
  latency: (params) => api('GET', `/v1/steps/latency${qs(params)}`),
  run: (traceId) => api('GET', `/v1/runs/${encodeURIComponent(traceId)}`),
};
export const percentiles = (args) => api('POST', M + 'percentiles', args);
