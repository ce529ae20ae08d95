export * from './step-event';
export * from './validation';
export * from './scopes';
export * from './guard';
export * from './step-usage-recorded';
export * from './usage/normalize-usage';
export * from './usage/provider-usage';
export * from './memoized';
