// Request state as the scheduler sees it: token ids and counters only (no tensors, no text).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "api/request.h"  // FinishReason
#include "kv/block_hash.h"

namespace tmill {

using RequestId = uint64_t;

enum class RequestStatus : uint8_t {
  Waiting,          // queued, never scheduled
  Running,          // holds KV blocks, scheduled every step it fits the budget
  Preempted,        // blocks freed, back in the waiting queue; recomputes prompt + outputs
  FinishedStopped,  // stop token (or stop string via Scheduler::finish)
  FinishedLength,   // max_tokens, max_model_len or the KV capacity reached
  FinishedAborted,  // abort()
  FinishedError,    // finish(id, Error)
};

std::string_view to_string(RequestStatus status);
bool is_finished(RequestStatus status);
RequestStatus finished_status(FinishReason reason);

// What the engine submits.
struct RequestParams {
  RequestId id = 0;
  std::vector<int32_t> prompt;           // token ids, non-empty
  int32_t max_tokens = 16;               // >= 1 output tokens at most
  int32_t min_tokens = 0;                // stop tokens are ignored before this many outputs
  std::vector<int32_t> stop_token_ids;   // include eos here unless ignore_eos
  int32_t max_model_len = 0;             // 0: the scheduler's limit; else min of both
  int32_t priority = 0;                  // priority policy: lower value runs first
  std::optional<uint64_t> cache_key;     // prefix-cache extra key (LoRA id, cache salt)
};

class Request {
 public:
  // shift_keep: context shift (SchedulerConfig::context_shift) with this many leading tokens kept
  // (-1: the prompt); unset: reaching max_model_len finishes the request with Length.
  Request(RequestParams params, uint64_t arrival, int32_t max_model_len, int32_t block_size,
          std::optional<int32_t> shift_keep = std::nullopt);

  RequestId id() const { return params_.id; }
  const RequestParams& params() const { return params_; }  // params().prompt is empty: see prompt()
  uint64_t arrival() const { return arrival_; }  // monotone admission sequence number
  int32_t priority() const { return params_.priority; }
  int32_t max_model_len() const { return max_model_len_; }

  // All known tokens: prompt followed by outputs (a preempted request recomputes all of them).
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const int32_t> prompt() const { return std::span(tokens_).first(num_prompt_tokens_); }
  std::span<const int32_t> outputs() const { return std::span(tokens_).subspan(num_prompt_tokens_); }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }  // still in tokens()
  // Outputs generated in all: num_output_tokens() plus those a context shift discarded. max_tokens
  // and min_tokens count these.
  int32_t num_generated() const { return num_generated_; }
  int32_t num_context_shifts() const { return num_context_shifts_; }
  // Prefix-cache keys of every full block of tokens().
  std::span<const BlockHash> block_hashes() const { return block_hashes_; }

  int32_t num_computed_tokens = 0;  // tokens whose KV is in the cache
  // Speculative decoding: tokens proposed for the positions after tokens() (Scheduler::set_draft_tokens),
  // scored with the request's next decode; update() clears them. Never part of tokens().
  std::vector<int32_t> draft_tokens;
  RequestStatus status = RequestStatus::Waiting;
  int32_t num_preemptions = 0;

  // Appends a sampled token and returns the finish reason it triggers (None: keep going).
  FinishReason append_output(int32_t token);
  // Finish reason for the current last token (used after fork replaces it).
  FinishReason check_stop() const;
  // Replaces the last output token (fork: the child samples its own first token).
  void replace_last_output(int32_t token);
  // Context shift: discards half of the tokens after the kept prefix (the oldest ones), so that
  // generation can go on past max_model_len; the request must then recompute its KV from position 0
  // (num_computed_tokens = 0; the caller frees its blocks). The kept prefix is shift_keep tokens
  // (-1: the prompt), at most half of max_model_len. Returns the number of tokens discarded.
  int32_t shift_context();
  bool context_shift_enabled() const { return shift_keep_.has_value(); }
  // A copy with a new id and arrival that continues from the same state (fork).
  Request fork_as(RequestId child_id, uint64_t arrival) const;

 private:
  RequestParams params_;
  uint64_t arrival_;
  int32_t max_model_len_;
  int32_t block_size_;
  int32_t num_prompt_tokens_;
  std::vector<int32_t> tokens_;
  std::vector<BlockHash> block_hashes_;
  std::optional<int32_t> shift_keep_;
  int32_t num_generated_ = 0;
  int32_t num_context_shifts_ = 0;
};

}  // namespace tmill
