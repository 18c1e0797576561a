// OpenAI response JSON: chat.completion / text_completion objects, their streaming chunks, usage,
// both logprobs formats, and Server-Sent Events framing.
//
//   chat (non-streaming): {"id":"chatcmpl-..","object":"chat.completion","created":T,"model":M,
//     "choices":[{"index":0,"message":{"role":"assistant","content":".."},"logprobs":null,
//                 "finish_reason":"stop","stop_reason":null}],
//     "usage":{"prompt_tokens":P,"completion_tokens":C,"total_tokens":P+C,"prompt_tokens_details":{"cached_tokens":K}}}
//   chat chunk: {"id","object":"chat.completion.chunk","created","model",
//     "choices":[{"index":0,"delta":{"content":".."},"logprobs":null,"finish_reason":null}]}
//   completions: "object":"text_completion", choices[i] = {"index","text","logprobs","finish_reason","stop_reason"}
//   SSE: "data: <json>\n\n" per event, "data: [DONE]\n\n" at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"  // FinishReason, SampleResult
#include "server/api_error.h"
#include "server/openai_request.h"

namespace tmill {
class Tokenizer;
}

namespace tmill::server {

struct ResponseMeta {
  std::string id;        // "chatcmpl-<32 hex>" / "cmpl-<32 hex>"
  int64_t created = 0;   // unix seconds
  std::string model;
  ApiKind kind = ApiKind::Chat;
  bool prompt_truncated = false;  // truncate_prompt_tokens cut the prompt: "prompt_truncated": true
};
ResponseMeta make_meta(ApiKind kind, const std::string& model);  // fresh random id, current time
// prefix + 32 random hex digits (response ids, generated X-Request-Id).
std::string random_id(std::string_view prefix);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t dropped_messages = 0;  // truncation "auto": "truncation": {"dropped_messages", "dropped_prompt_tokens"}
  int64_t dropped_tokens = 0;
  CompressionReport compression;  // history compression: "compression": {...} when messages were replaced
};
json usage_json(const Usage& u);

// One choice's (accumulated or new) output.
struct ChoiceOutput {
  int32_t index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<SampleResult> logprobs;  // one per token when requested
  FinishReason finish = FinishReason::None;
  json stop_reason = nullptr;          // vLLM: the stop string, the stop token id, or null (EOS / length)
  json tool_calls = nullptr;           // chat with tools: message.tool_calls (text is then the remaining content)
  // Chat with a reasoning parser (reasoning_output.h): `text` is the answer only, and the message gets
  // "reasoning_content" (null when there was none) and a null "content" when the answer is empty.
  bool reasoning_split = false;
  std::optional<std::string> reasoning;
};

const char* finish_reason_string(FinishReason r);  // "stop", "length", "abort", "error"; None -> ""
json finish_reason_json(FinishReason r);           // null while unfinished

// Token text for logprobs (raw piece bytes; invalid UTF-8 becomes U+FFFD when dumped).
std::string token_string(const Tokenizer& tok, int32_t id);
size_t utf8_length(const std::string& s);  // code points (text_offset counts them, as Python's len)
json bytes_json(const std::string& s);      // [byte values]
// JSON has no -inf: a token the model gives probability 0 reports -9999, as vLLM does.
double finite_logprob(float lp);

// {"content":[{"token","logprob","bytes","top_logprobs":[...]}]}
json chat_logprobs_json(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::vector<SampleResult>& lps,
                        int32_t top_n);
// {"tokens","token_logprobs","top_logprobs":[{token: logprob}],"text_offset"}; *offset advances.
json completion_logprobs_json(const Tokenizer& tok, const std::vector<int32_t>& ids,
                              const std::vector<SampleResult>& lps, int32_t top_n, int64_t* offset);

struct LogprobsSpec {
  bool enabled = false;
  int32_t top_n = 0;
};

// Non-streaming bodies. For completions, echo_prefix[i] is prepended to choice i's text.
json chat_response(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, const Usage& usage,
                   const Tokenizer& tok, LogprobsSpec lp);
json completion_response(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, const Usage& usage,
                         const Tokenizer& tok, LogprobsSpec lp, const std::vector<std::string>& echo_prefix);

// Streaming chunks. `usage`, when given, is attached as the "usage" field (null included: OpenAI
// sends "usage": null on every chunk when stream_options.include_usage is set).
json chat_chunk(const ResponseMeta& meta, int32_t index, json delta, json logprobs, FinishReason finish,
                json stop_reason, const json* usage = nullptr);
json completion_chunk(const ResponseMeta& meta, int32_t index, const std::string& text, json logprobs,
                      FinishReason finish, json stop_reason, const json* usage = nullptr);
json usage_chunk(const ResponseMeta& meta, const Usage& usage);  // "choices": [] + usage

std::string dump_json(const json& j);           // compact; invalid UTF-8 replaced by U+FFFD
std::string sse_event(const json& j);           // "data: <json>\n\n"
const std::string& sse_done();                  // "data: [DONE]\n\n"

}  // namespace tmill::server
