// @tollgate/sdk/ai-sdk: Tollgate's guard and ledger as a language-model middleware for the AI SDK
// (`wrapLanguageModel`, AI SDK 5 and 6). No dependency on `ai` itself.
export {
  tollgateMiddleware,
  TollgateGuardDeniedError,
  isTollgateGuardDenied,
  type TollgateMiddlewareOptions,
  type TollgateLanguageModelMiddleware,
  type TollgateModelCall,
  type AiSdkModelLike,
  type AiSdkCallOptionsLike,
} from './middleware';
