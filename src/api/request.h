// The engine's public request types: what a caller submits (GenerateRequest), what it receives per
// step (RequestOutput), how a request ended (FinishReason), and why a request was refused
// (RequestProblem). Plain data, header-only: `sched` and `engine` build on them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "api/constraint.h"
#include "api/sampling.h"

namespace tmill {

using Clock = std::chrono::steady_clock;

enum class FinishReason : uint8_t { None, Stop, Length, Abort, Error };

// "stop", "length", "abort", "error"; "" for None.
inline std::string_view to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::None: return "";
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
  }
  return "?";
}

struct GenerateRequest {
  std::vector<int32_t> prompt;           // token ids (BOS already added when the model wants it)
  SamplingParams sampling;
  int32_t max_tokens = 16;
  int32_t min_tokens = 0;
  std::vector<std::string> stop;         // stop strings (not included in the output text)
  std::vector<int32_t> stop_token_ids;   // in addition to the model's end-of-generation tokens
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  int32_t n = 1;                         // choices; they share the prompt's KV blocks
  int32_t priority = 0;                  // priority policy: lower value runs first
  // Fail the request (FinishReason::Error, stop_reason "timeout") if it has not been scheduled this
  // long after submission. 0: wait forever.
  double queue_timeout_s = 0;
  OutputConstraint constraint;           // structured output; Kind::None: free text
  // A loaded LoRA adapter's name (Engine::load_lora / EngineConfig::loras); "" = the base model.
  // Its deltas are scaled by lora_scale (times the adapter's alpha / rank); 0 = the base model.
  std::string lora;
  float lora_scale = 1.0f;
  // false: no speculative decoding for this request, whatever the engine's --speculative-config.
  bool speculative = true;
  // Testing aid for the "replay" proposer: the continuation it replays (e.g. the request's known
  // greedy output). Ignored by every other proposer.
  std::vector<int32_t> debug_replay_tokens;
};

// Why the engine refuses a request (Engine::check / Engine::submit). `field` names the request field
// in the OpenAI API's spelling ("prompt", "max_tokens", "top_p", ...), so a front end can point at it.
struct RequestProblem {
  // NotFound: the request names something the engine does not have (an unloaded LoRA adapter).
  enum class Kind : uint8_t { Invalid, ContextLength, NotFound };
  Kind kind = Kind::Invalid;
  std::string field;
  std::string message;
};

// Streamed to the submitter's callback on the engine thread; the callback must not block.
struct RequestOutput {
  uint64_t request_id = 0;
  int32_t index = 0;                   // choice index (n > 1)
  std::vector<int32_t> token_ids;      // new tokens since the previous output for this choice
  std::vector<SampleResult> logprobs;  // one per new token when sampling.logprobs >= 0
  std::string text;                    // new text (complete UTF-8, stop strings held back/removed)
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  std::string stop_reason;             // the stop string or token that ended it, or an error message
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;       // total so far for this choice
  int32_t cached_prompt_tokens = 0;    // prompt tokens served from the prefix cache
};

using OutputCallback = std::function<void(const RequestOutput&)>;

}  // namespace tmill
