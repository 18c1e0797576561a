// OpenAI request JSON -> engine requests. Pure functions of (body, context): no I/O, no engine, so
// they are unit-tested and fuzzed directly (tests/unit/server, tests/fuzz/fuzz_request.cpp).
//
//   ServerContext ctx{...};                       // model name, tokenizer, chat template, limits
//   ApiError err;
//   auto m = map_chat_request(body, ctx, &err);    // Result<MappedRequest>; on failure err has the
//                                                  // HTTP status, param and code for the response
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/reasoning_output.h"
#include "server/tool_request.h"

namespace tmill {
class Tokenizer;
class ChatTemplate;
}  // namespace tmill

namespace tmill::server {

// What request mapping needs to know about the served model and the server's limits.
struct ServerContext {
  std::string served_model_name;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const ChatTemplate> chat_template;  // null: /v1/chat/completions is a 400
  int32_t max_model_len = 0;
  int32_t n_vocab = 0;
  int32_t max_tokens_default = 4096;  // cap on max_tokens when a chat request omits it; 0: no cap
  int32_t max_n = 16;                 // largest n (choices per prompt)
  int32_t max_logprobs = 20;          // largest logprobs / top_logprobs
  int32_t max_prompts = 64;           // prompts in one /v1/completions request
  int32_t max_stop = 64;              // stop strings / stop token ids
  double queue_timeout_s = 0;         // --request-timeout (engine queue_timeout_s)
  double max_request_time_s = 0;      // --max-request-time: cap on (and default of) a request's "timeout"; 0: none
  bool priority_scheduling = false;   // "priority" != 0 needs --scheduling-policy priority
  bool context_shift = false;         // --context-shift: max_tokens may run past the context
  ReasoningConfig reasoning;          // --reasoning-parser (default: detect from the chat template)
  std::optional<ToolCallFormat> tool_call_parser;  // --tool-call-parser; unset: from the chat template
  bool truncation_auto = false;       // --truncation auto: requests without "truncation" drop old turns
  GenerationDefaults defaults;        // --generation-config: sampling fields a request omits
  // The engine's front door (Engine::check: limits and the output constraint compiled); unset: only
  // the limits (check_request), as in tests without an engine.
  std::function<std::optional<RequestProblem>(const GenerateRequest&)> check;

  // What the engine checks every request against (check_request).
  RequestLimits limits() const { return {n_vocab, max_model_len, priority_scheduling, context_shift}; }
};

// What compression did to one request (usage.compression in the response).
struct CompressionReport {
  int32_t compressed_messages = 0;  // messages replaced by the summary (0: no compression)
  int32_t saved_prompt_tokens = 0;  // prompt tokens before minus after
  int32_t summary_tokens = 0;       // tokens of the summary text
  bool cached = false;              // the summary came from the cache (no generation this request)
  int32_t summary_prompt_tokens = 0;      // the summarization request's own usage (0 when cached)
  int32_t summary_completion_tokens = 0;
};

// Native: llama-server's own POST /completion (llama_request.h), mapped as a completion whose
// response has llama-server's shape.
enum class ApiKind { Chat, Completion, Native };

// llama-server's /completion options that shape its response, not the generation (llama_request.h).
struct NativeOptions {
  bool return_tokens = false;      // "tokens": the generated ids in the final result
  bool timings_per_token = false;  // "timings" on every streamed chunk, not only the last
  bool prompt_only = false;        // n_predict 0: evaluate the prompt (into the prefix cache), return no text
  // Stops the server applies to the generated text (native_stop, llama_request.h): a line indented
  // less than n_indent ends it there; after t_max_predict_ms since the first token, a newline ends it.
  int32_t n_indent = 0;
  int64_t t_max_predict_ms = 0;
  std::vector<std::string> response_fields;  // only these fields ("a/b" unnested to "b"); empty: all
  json generation_settings;        // the result's "generation_settings"
};

// One prompt of a request = one engine request (n choices).
struct MappedPrompt {
  GenerateRequest request;    // prompt tokens, sampling, limits; ready for Engine::submit
  std::string text;           // prompt text for echo (as given, or the decoded token ids)
  int32_t original_tokens = 0;  // before truncate_prompt_tokens
  bool truncated = false;
  int32_t dropped_messages = 0;  // truncation "auto": oldest messages left out of the prompt
  int32_t dropped_tokens = 0;    // and the prompt tokens that saved
};

struct MappedRequest {
  ApiKind kind = ApiKind::Completion;
  std::string model;                  // the served model name (echoed in responses)
  std::vector<MappedPrompt> prompts;  // chat: exactly one
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool continuous_usage = false;      // stream_options.continuous_usage_stats (vLLM): usage on every chunk
  bool echo = false;                  // completions: prepend the prompt text
  bool logprobs = false;              // return logprobs
  int32_t top_logprobs = 0;           // alternatives per token (chat top_logprobs / completions logprobs)
  bool max_tokens_given = false;
  double deadline_s = 0;              // "timeout" (capped by --max-request-time): the whole request's; 0: none
  std::optional<RequestReasoning> reasoning;  // chat: split <think>…</think> off (reasoning_output.h)
  ToolPlan tools;                     // chat: tools / tool_choice / parallel_tool_calls
  CompressionReport compression;      // chat: history compression (history_compression.h), usage.compression
  NativeOptions native;               // ApiKind::Native only
};

Result<MappedRequest> map_chat_request(const json& body, const ServerContext& ctx, ApiError* err = nullptr);
Result<MappedRequest> map_completion_request(const json& body, const ServerContext& ctx, ApiError* err = nullptr);

// The chat prompt text a request renders to (for /tokenize with messages, and for tests).
Result<std::string> render_chat_prompt(const json& body, const ServerContext& ctx, ApiError* err = nullptr);

// Internal pieces shared by the chat and completion mappers (throw RequestError).
namespace detail {
// The "model" field: absent is fine, a different name is a 404.
std::string check_model(const json& body, const ServerContext& ctx);
// Sampling, stop conditions, n, logprobs format excluded; fills `base` and the flags in `m`.
void map_common(const json& body, const ServerContext& ctx, ApiKind kind, GenerateRequest& base, MappedRequest& m);
// Applies truncate_prompt_tokens, max_tokens defaults and the context-length check to one prompt.
void finish_prompt(const json& body, const ServerContext& ctx, ApiKind kind, std::optional<int64_t> max_tokens,
                   MappedPrompt& p);
// The output constraint of response_format / structured_outputs / guided_* / json_schema / grammar
// (structured_request.cpp); Kind::None when none. Two of them at once is a 400.
OutputConstraint map_structured_output(const json& body);
// The /v1/completions mapping with `kind`'s defaults (Native: max_tokens absent means the rest of
// the context, as chat); throws RequestError.
MappedRequest map_completions(const json& body, const ServerContext& ctx, ApiKind kind);
// llama-server's mixed prompt to token ids: a string, an array of strings and token ids, or one id.
// Each string is tokenized in place (BOS/EOS per add_special only when it is the array's first
// element); each id goes through `id`, which checks it (throwing RequestError for what it refuses).
std::vector<int32_t> tokenize_mixed(const json& v, const Tokenizer& tok, bool add_special, bool parse_special,
                                    const std::function<int32_t(const json&)>& id);
// Runs a mapping, turning RequestError (and JSON type errors) into *err and an Error.
Result<MappedRequest> guard_mapping(const std::function<MappedRequest()>& map, ApiError* err);
// Renders `messages` with the chat template (honours add_generation_prompt, continue_final_message,
// chat_template, chat_template_kwargs, tools) through chat/messages.h; `messages` replaces the
// body's own (truncation).
std::string render_messages(const json& body, const ServerContext& ctx, const json* messages = nullptr);
// truncation "auto" (the request's, else the server's --truncation): while the prompt and the
// completion (max_tokens, else one token) do not fit the context, drop the oldest whole turns (a user
// message and what follows it up to the next one), never the leading system/developer messages nor
// the latest turn; p gets the shorter prompt and what was dropped (chat_truncation.cpp).
void truncate_chat(const json& body, const ServerContext& ctx, std::optional<int64_t> max_tokens, bool add_special,
                   MappedPrompt& p);
}  // namespace detail

}  // namespace tmill::server
