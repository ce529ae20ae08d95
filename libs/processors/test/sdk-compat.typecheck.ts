/**
 * Compiled by `tsc -p libs/processors/tsconfig.spec.json` (never run): fails to compile if
 * `TollgateClient` from `@tollgate/sdk` stops fitting the processors' client interface, or if the
 * processors' copies of the guard shapes drift from the service's contracts.
 */
import type {
  GuardCheckResponse as ServiceResponse,
  GuardFinding as ServiceFinding,
  RecordStepEvent,
  ScopeUsage,
  TollgateClient,
} from '@tollgate/sdk';
import type { GuardCheckRequest as ServiceRequestInput } from '@tollgate/sdk';
import type {
  GuardCheckRequest,
  GuardCheckResponse,
  GuardFinding,
  GuardScopeUsage,
  StepUsageEvent,
  TollgateGuardClient,
} from '../src';

declare const sdk: TollgateClient;
export const client: TollgateGuardClient = sdk;

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const same = <T extends true>(value: T) => value;
export const checks = [
  same<Same<GuardFinding, ServiceFinding>>(true),
  same<Same<GuardScopeUsage, ScopeUsage>>(true),
  same<Same<GuardCheckResponse, ServiceResponse>>(true),
] as const;

// What the processors send is what the SDK accepts.
export const request = (r: GuardCheckRequest): Parameters<TollgateClient['guard']['check']>[0] => r;
export const event = (e: StepUsageEvent): RecordStepEvent => e;
export type { ServiceRequestInput };
