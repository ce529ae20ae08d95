/** Bucket sizes of the rollups, in ms (UTC, aligned on the epoch): what the projection writes and the queries cover. */
export const GRANULARITY_MS = { d: 86_400_000, h: 3_600_000, m: 60_000 } as const;
export type Granularity = keyof typeof GRANULARITY_MS;
