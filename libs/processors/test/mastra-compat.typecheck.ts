/**
 * Compiled by `tsc -p libs/processors/tsconfig.spec.json` (never run): fails to compile if the
 * processors stop matching @mastra/core's processor interfaces structurally.
 */
import type { InputProcessor, OutputProcessor, Processor } from '@mastra/core/processors';
import { CostGuardProcessor, TokenCostControl, TokenLimiterProcessor } from '../src';

const limiter = new TokenLimiterProcessor(1000);
export const asInput: InputProcessor = limiter;
export const asOutput: OutputProcessor = limiter;
export const asProcessor: Processor<'token-limiter'> = limiter;

const costGuard = new CostGuardProcessor({ maxCost: 1 });
export const guardAsInput: InputProcessor = costGuard;
export const guardAsProcessor: Processor<'cost-guard'> = costGuard;

const tokenCostControl = new TokenCostControl({ maxCost: 1 });
export const controlAsInput: InputProcessor = tokenCostControl;
export const controlAsProcessor: Processor<'token-cost-control'> = tokenCostControl;
