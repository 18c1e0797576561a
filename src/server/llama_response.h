// llama-server's native /completion results (its to_json_non_oaicompat shapes), for llama_request.h's
// requests:
//
//   final: {"index","content","tokens","id_slot","stop":true,"model","tokens_predicted",
//           "tokens_evaluated","generation_settings","prompt","has_new_line","truncated",
//           "stop_type":"eos"|"word"|"limit"|"none","stopping_word","tokens_cached","timings",
//           "completion_probabilities" (n_probs > 0, not streamed)}
//   streamed: {"index","content","tokens","stop":false,"id_slot","tokens_predicted",
//              "tokens_evaluated", "timings" (timings_per_token), "completion_probabilities"}
//             per piece of text, then the final result with empty content; no [DONE].
//   timings: {"cache_n","prompt_n","prompt_ms","prompt_per_token_ms","prompt_per_second",
//             "predicted_n","predicted_ms","predicted_per_token_ms","predicted_per_second"}
//
// One prompt and n 1 answer one object; more answer an array of them, by "index".
#pragma once

#include <string>
#include <vector>

#include "server/openai_response.h"

namespace tmill::server {

class Generation;
struct OutputItem;

struct NativeTimings {
  int64_t cache_n = 0;       // prompt tokens served from the prefix cache
  int64_t prompt_n = 0;      // prompt tokens computed
  double prompt_ms = 0;      // arrival to the first token (queue wait included)
  int64_t predicted_n = 0;   // tokens generated
  double predicted_ms = 0;   // first token to the last
};
json native_timings_json(const NativeTimings& t);

// "eos" (end of sequence or a stop token id), "word" (a stop string), "limit" (max tokens) or "none".
const char* native_stop_type(FinishReason finish, const json& stop_reason);

// completion_probabilities: [{"id","token","bytes","logprob","top_logprobs":[{"id","token","bytes","logprob"}]}]
json native_probs_json(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::vector<SampleResult>& lps,
                       int32_t top_n);

struct NativeResult {
  int32_t index = 0;
  std::string model;
  std::string content;                 // empty in a stream's final result (the chunks carried it)
  std::vector<int32_t> tokens;         // return_tokens
  int64_t tokens_predicted = 0;
  int64_t tokens_evaluated = 0;        // prompt tokens
  std::string prompt;                  // the prompt's text
  bool truncated = false;
  FinishReason finish = FinishReason::None;
  json stop_reason = nullptr;          // Generation::stop_reason
  NativeTimings timings;
  json probs = nullptr;                // native_probs_json, or null
};
json native_final_json(const NativeResult& r, const NativeOptions& opts);

json native_partial_json(int32_t index, const std::string& content, const std::vector<int32_t>& tokens,
                         int64_t tokens_predicted, int64_t tokens_evaluated, const NativeTimings* timings, json probs);

// A Generation of ApiKind::Native, rendered: the whole non-streamed body, and the SSE events one
// streamed output item gives (empty when it gives none).
json native_response(const Generation& gen, const Tokenizer& tok);
std::string native_stream_events(const Generation& gen, const OutputItem& it, const Tokenizer& tok);

// response_fields: {"<path>": value} for each "a/b" path that exists; all of `res` when none.
json select_response_fields(const json& res, const std::vector<std::string>& fields);

}  // namespace tmill::server
