export * from './step-event';
export * from './validation';
