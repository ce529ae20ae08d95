import { usageSchema } from '../step-event';
import { fromAnthropic, fromBedrock, fromGemini, fromOpenAI, type NormalizedUsage } from './normalize-usage';

// Fixtures: each provider's documented response shapes, non-streaming and the final usage of a
// stream, with the usage Tollgate must record (input includes cache reads and writes, output
// includes reasoning, breakdowns are parts of their totals).

/** What every normalizer must give: the expected usage, valid for the service. */
function expectUsage(result: NormalizedUsage, usage: NormalizedUsage['usage']) {
  expect(result).toEqual({ usage });
  expect(usageSchema.safeParse(result.usage).success).toBe(true);
}

describe('fromOpenAI', () => {
  describe('Chat Completions', () => {
    it('cache hit and reasoning (o-series): cached tokens are inside prompt_tokens, reasoning inside completion_tokens', () => {
      const response = {
        id: 'chatcmpl-abc123',
        object: 'chat.completion',
        model: 'o4-mini-2025-04-16',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Paris.' }, finish_reason: 'stop' }],
        usage: {
          prompt_tokens: 2006,
          completion_tokens: 300,
          total_tokens: 2306,
          prompt_tokens_details: { cached_tokens: 1920, audio_tokens: 0 },
          completion_tokens_details: {
            reasoning_tokens: 256,
            audio_tokens: 0,
            accepted_prediction_tokens: 0,
            rejected_prediction_tokens: 0,
          },
        },
      };
      expectUsage(fromOpenAI(response.usage), {
        inputTokens: 2006,
        outputTokens: 300,
        cacheReadTokens: 1920,
        reasoningTokens: 256,
      });
    });

    it('no cache: the counts as they are, no zero breakdowns', () => {
      const usage = {
        prompt_tokens: 19,
        completion_tokens: 10,
        total_tokens: 29,
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
        completion_tokens_details: {
          reasoning_tokens: 0,
          audio_tokens: 0,
          accepted_prediction_tokens: 0,
          rejected_prediction_tokens: 0,
        },
      };
      expectUsage(fromOpenAI(usage), { inputTokens: 19, outputTokens: 10 });
    });

    it('audio input (gpt-4o-audio-preview): audio tokens are a part of prompt_tokens', () => {
      const usage = {
        prompt_tokens: 160,
        completion_tokens: 80,
        total_tokens: 240,
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 120 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 64 },
      };
      expectUsage(fromOpenAI(usage), { inputTokens: 160, outputTokens: 80, audioInputTokens: 120 });
    });

    it('stream with include_usage: the chunks before the last carry usage null, the last one (no choices) the totals', () => {
      const chunks = [
        {
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          model: 'gpt-4o-mini',
          choices: [{ index: 0, delta: { content: 'Hel' }, finish_reason: null }],
          usage: null,
        },
        {
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          model: 'gpt-4o-mini',
          choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
          usage: null,
        },
        {
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          model: 'gpt-4o-mini',
          choices: [],
          usage: {
            prompt_tokens: 1200,
            completion_tokens: 48,
            total_tokens: 1248,
            prompt_tokens_details: { cached_tokens: 1024, audio_tokens: 0 },
            completion_tokens_details: {
              reasoning_tokens: 0,
              audio_tokens: 0,
              accepted_prediction_tokens: 0,
              rejected_prediction_tokens: 0,
            },
          },
        },
      ];
      expectUsage(fromOpenAI(chunks[0]!.usage), { inputTokens: 0, outputTokens: 0 });
      expectUsage(fromOpenAI(chunks[2]!.usage), { inputTokens: 1200, outputTokens: 48, cacheReadTokens: 1024 });
    });
  });

  describe('Responses API', () => {
    it('cache hit and reasoning: input_tokens includes cached_tokens, output_tokens includes reasoning_tokens', () => {
      const response = {
        id: 'resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b',
        object: 'response',
        status: 'completed',
        model: 'o3-2025-04-16',
        usage: {
          input_tokens: 5000,
          input_tokens_details: { cached_tokens: 4096 },
          output_tokens: 1200,
          output_tokens_details: { reasoning_tokens: 1024 },
          total_tokens: 6200,
        },
      };
      expectUsage(fromOpenAI(response.usage), {
        inputTokens: 5000,
        outputTokens: 1200,
        cacheReadTokens: 4096,
        reasoningTokens: 1024,
      });
    });

    it('stream: the response.completed event carries the response with its usage', () => {
      const completed = {
        type: 'response.completed',
        sequence_number: 42,
        response: {
          id: 'resp_1',
          object: 'response',
          status: 'completed',
          usage: {
            input_tokens: 328,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: 52,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: 380,
          },
        },
      };
      expectUsage(fromOpenAI(completed.response.usage), { inputTokens: 328, outputTokens: 52 });
    });
  });
});

describe('fromAnthropic', () => {
  it('cache hit: input_tokens leaves the 10,000 cache reads out; Tollgate counts them in', () => {
    const response = {
      id: 'msg_01XFDUDYJgAACzvnptvVoYEL',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-20250514',
      content: [{ type: 'text', text: 'The contract says…' }],
      stop_reason: 'end_turn',
      usage: {
        input_tokens: 50,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 10_000,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
        output_tokens: 20,
        service_tier: 'standard',
      },
    };
    expectUsage(fromAnthropic(response.usage), { inputTokens: 10_050, outputTokens: 20, cacheReadTokens: 10_000 });
  });

  it('cache write with both times to live: the writes are added to the input, their 5-minute / 1-hour split comes beside the usage', () => {
    // Anthropic's documented mixed-TTL example.
    const usage = {
      input_tokens: 2048,
      cache_read_input_tokens: 1800,
      cache_creation_input_tokens: 248,
      output_tokens: 503,
      cache_creation: { ephemeral_1h_input_tokens: 100, ephemeral_5m_input_tokens: 148 },
    };
    expectUsage(fromAnthropic(usage), {
      inputTokens: 4096,
      outputTokens: 503,
      cacheReadTokens: 1800,
      cacheWriteTokens: 248,
      cacheWrite1hTokens: 100,
    });
  });

  it('cache write from an older API version: no cache_creation object, so no split', () => {
    expectUsage(
      fromAnthropic({
        input_tokens: 12,
        cache_creation_input_tokens: 3000,
        cache_read_input_tokens: 0,
        output_tokens: 240,
      }),
      { inputTokens: 3012, outputTokens: 240, cacheWriteTokens: 3000 },
    );
  });

  it('extended thinking: output_tokens includes the thinking, and a thinking count, where reported, is a part of it', () => {
    expectUsage(
      fromAnthropic({
        input_tokens: 1200,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
        output_tokens: 3100,
      }),
      { inputTokens: 1200, outputTokens: 3100 },
    );
    expectUsage(
      fromAnthropic({ input_tokens: 1200, output_tokens: 3100, output_tokens_details: { thinking_tokens: 2800 } }),
      { inputTokens: 1200, outputTokens: 3100, reasoningTokens: 2800 },
    );
  });

  it('stream: message_start has the input and cache counts, the final message_delta the cumulative output', () => {
    const start = {
      type: 'message_start',
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        content: [],
        model: 'claude-sonnet-4-20250514',
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 472, cache_creation_input_tokens: 0, cache_read_input_tokens: 10_000, output_tokens: 2 },
      },
    };
    const delta = {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: 315 },
    };
    expectUsage(fromAnthropic(start.message.usage, delta.usage), {
      inputTokens: 10_472,
      outputTokens: 315,
      cacheReadTokens: 10_000,
    });
  });

  it('stream: a message_delta with null input and cache counts keeps the start’s, and its non-null ones win', () => {
    const start = {
      input_tokens: 472,
      cache_creation_input_tokens: 1024,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 1024, ephemeral_1h_input_tokens: 0 },
      output_tokens: 1,
    };
    expectUsage(
      fromAnthropic(start, {
        input_tokens: null,
        cache_creation_input_tokens: null,
        cache_read_input_tokens: null,
        output_tokens: 88,
      }),
      { inputTokens: 1496, outputTokens: 88, cacheWriteTokens: 1024 },
    );
    expectUsage(fromAnthropic(start, { input_tokens: 480, output_tokens: 88 }), {
      inputTokens: 1504,
      outputTokens: 88,
      cacheWriteTokens: 1024,
    });
  });

  it('a split that does not add up to the total: the total wins, the 1-hour part is kept', () => {
    expectUsage(
      fromAnthropic({
        input_tokens: 10,
        cache_creation_input_tokens: 100,
        cache_creation: { ephemeral_5m_input_tokens: 80, ephemeral_1h_input_tokens: 60 },
        output_tokens: 1,
      }),
      { inputTokens: 110, outputTokens: 1, cacheWriteTokens: 100, cacheWrite1hTokens: 60 },
    );
    expectUsage(
      fromAnthropic({
        input_tokens: 10,
        cache_creation: { ephemeral_5m_input_tokens: 80, ephemeral_1h_input_tokens: 60 },
        output_tokens: 1,
      }),
      { inputTokens: 150, outputTokens: 1, cacheWriteTokens: 140, cacheWrite1hTokens: 60 },
    );
  });
});

describe('fromGemini', () => {
  it('implicit cache hit and thinking: cachedContentTokenCount is inside promptTokenCount, thoughtsTokenCount is added to the output', () => {
    const response = {
      candidates: [{ content: { role: 'model', parts: [{ text: 'Summary…' }] }, finishReason: 'STOP', index: 0 }],
      usageMetadata: {
        promptTokenCount: 12_040,
        candidatesTokenCount: 310,
        totalTokenCount: 13_050,
        cachedContentTokenCount: 10_240,
        thoughtsTokenCount: 700,
        promptTokensDetails: [{ modality: 'TEXT', tokenCount: 12_040 }],
        cacheTokensDetails: [{ modality: 'TEXT', tokenCount: 10_240 }],
      },
      modelVersion: 'gemini-2.5-flash',
    };
    expectUsage(fromGemini(response.usageMetadata), {
      inputTokens: 12_040,
      outputTokens: 1010,
      cacheReadTokens: 10_240,
      reasoningTokens: 700,
    });
  });

  it('stream: each chunk carries the counts so far; the last one is the step’s', () => {
    const chunks = [
      {
        candidates: [{ content: { role: 'model', parts: [{ text: 'Sum' }] } }],
        usageMetadata: {
          promptTokenCount: 900,
          totalTokenCount: 900,
          promptTokensDetails: [{ modality: 'TEXT', tokenCount: 900 }],
        },
      },
      {
        candidates: [{ content: { role: 'model', parts: [{ text: 'mary.' }] }, finishReason: 'STOP' }],
        usageMetadata: {
          promptTokenCount: 900,
          candidatesTokenCount: 42,
          thoughtsTokenCount: 120,
          totalTokenCount: 1062,
          promptTokensDetails: [{ modality: 'TEXT', tokenCount: 900 }],
        },
      },
    ];
    expectUsage(fromGemini(chunks[1]!.usageMetadata), { inputTokens: 900, outputTokens: 162, reasoningTokens: 120 });
  });

  it('tool-use prompts and audio: toolUsePromptTokenCount is input beside the prompt, audio input from promptTokensDetails', () => {
    const usageMetadata = {
      promptTokenCount: 900,
      candidatesTokenCount: 50,
      toolUsePromptTokenCount: 120,
      totalTokenCount: 1070,
      promptTokensDetails: [
        { modality: 'TEXT', tokenCount: 500 },
        { modality: 'AUDIO', tokenCount: 400 },
      ],
      toolUsePromptTokensDetails: [{ modality: 'TEXT', tokenCount: 120 }],
    };
    expectUsage(fromGemini(usageMetadata), { inputTokens: 1020, outputTokens: 50, audioInputTokens: 400 });
  });

  it('Vertex AI, with an image, no thinking', () => {
    const usageMetadata = {
      promptTokenCount: 1290,
      candidatesTokenCount: 80,
      totalTokenCount: 1370,
      trafficType: 'ON_DEMAND',
      promptTokensDetails: [
        { modality: 'TEXT', tokenCount: 32 },
        { modality: 'IMAGE', tokenCount: 1258 },
      ],
      candidatesTokensDetails: [{ modality: 'TEXT', tokenCount: 80 }],
    };
    expectUsage(fromGemini(usageMetadata), { inputTokens: 1290, outputTokens: 80, imageInputTokens: 1258 });
  });
});

describe('fromBedrock', () => {
  it('Converse cache hit: inputTokens leaves cache reads out; Tollgate counts them in', () => {
    const response = {
      output: { message: { role: 'assistant', content: [{ text: 'The contract says…' }] } },
      stopReason: 'end_turn',
      usage: {
        inputTokens: 50,
        outputTokens: 20,
        totalTokens: 10_070,
        cacheReadInputTokens: 10_000,
        cacheWriteInputTokens: 0,
      },
      metrics: { latencyMs: 812 },
    };
    expectUsage(fromBedrock(response.usage), { inputTokens: 10_050, outputTokens: 20, cacheReadTokens: 10_000 });
  });

  it('Converse cache write with both times to live: cacheDetails is the split', () => {
    const usage = {
      inputTokens: 12,
      outputTokens: 240,
      totalTokens: 3252,
      cacheReadInputTokens: 0,
      cacheWriteInputTokens: 3000,
      cacheDetails: [
        { ttl: '1h', inputTokens: 2000 },
        { ttl: '5m', inputTokens: 1000 },
      ],
    };
    expectUsage(fromBedrock(usage), {
      inputTokens: 3012,
      outputTokens: 240,
      cacheWriteTokens: 3000,
      cacheWrite1hTokens: 2000,
    });
  });

  it('ConverseStream: the metadata event carries the usage', () => {
    const metadata = {
      metadata: {
        usage: {
          inputTokens: 4,
          outputTokens: 2,
          totalTokens: 1540,
          cacheReadInputTokens: 0,
          cacheWriteInputTokens: 1534,
        },
        metrics: { latencyMs: 1200 },
      },
    };
    expectUsage(fromBedrock(metadata.metadata.usage), { inputTokens: 1538, outputTokens: 2, cacheWriteTokens: 1534 });
  });

  it('no caching: the counts as they are', () => {
    expectUsage(fromBedrock({ inputTokens: 125, outputTokens: 60, totalTokens: 185 }), {
      inputTokens: 125,
      outputTokens: 60,
    });
  });

  it('cacheDetails without a known time to live says nothing of the split', () => {
    expectUsage(fromBedrock({ inputTokens: 12, outputTokens: 1, cacheWriteInputTokens: 300, cacheDetails: [] }), {
      inputTokens: 312,
      outputTokens: 1,
      cacheWriteTokens: 300,
    });
    expectUsage(
      fromBedrock({
        inputTokens: 12,
        outputTokens: 1,
        cacheWriteInputTokens: 300,
        cacheDetails: [{ ttl: '1d', inputTokens: 300 }],
      }),
      { inputTokens: 312, outputTokens: 1, cacheWriteTokens: 300 },
    );
  });
});
