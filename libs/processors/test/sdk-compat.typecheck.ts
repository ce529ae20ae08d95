/**
 * Compiled by `tsc -p libs/processors/tsconfig.spec.json` (never run): fails to compile if
 * `TollgateClient` from `@tollgate/sdk` stops fitting the processors' client interface. The wire
 * shapes themselves cannot drift: both packages compile them from libs/contracts.
 */
import type { RecordStepEvent, TollgateClient } from '@tollgate/sdk';
import type { GuardCheckRequest, StepUsageEvent, TollgateGuardClient } from '../src';

declare const sdk: TollgateClient;
export const client: TollgateGuardClient = sdk;

// What the processors send is what the SDK accepts.
export const request = (r: GuardCheckRequest): Parameters<TollgateClient['guard']['check']>[0] => r;
export const event = (e: StepUsageEvent): RecordStepEvent => e;
