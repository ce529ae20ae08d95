import type { ParsedStepUsageEvent, ProviderUsage, StepUsageEvent } from '../step-event';
import { fromAiSdk, fromAnthropic, fromBedrock, fromGemini, fromOpenAI, type NormalizedUsage } from './normalize-usage';

/**
 * Reads a step's provider usage the way its provider means it. `provider` is the step's own
 * (`anthropic`, `openai`, …, or the AI SDK's id such as `anthropic.messages`): it decides what an
 * AI SDK 5 model's numbers mean.
 */
export function readProviderUsage(p: ProviderUsage, provider: string): NormalizedUsage {
  switch (p.format) {
    case 'openai':
      return fromOpenAI(p.usage);
    case 'anthropic':
      return fromAnthropic(p.usage);
    case 'gemini':
      return fromGemini(p.usage);
    case 'bedrock':
      return fromBedrock(p.usage);
    case 'ai-sdk':
      return fromAiSdk(p.usage, { provider, providerMetadata: p.providerMetadata, specVersion: p.specVersion });
  }
}

/** The event with its usage in Tollgate's terms: as sent, or read from its provider usage. */
export function withProviderUsageRead(e: ParsedStepUsageEvent): StepUsageEvent {
  if (e.usage) return { ...e, usage: e.usage };
  return { ...e, usage: readProviderUsage(e.providerUsage!, e.provider).usage };
}
