#include "sched/request.h"

#include <algorithm>

#include "core/log.h"

namespace tmill {

std::string_view to_string(RequestStatus status) {
  switch (status) {
    case RequestStatus::Waiting: return "waiting";
    case RequestStatus::Running: return "running";
    case RequestStatus::Preempted: return "preempted";
    case RequestStatus::FinishedStopped: return "finished_stopped";
    case RequestStatus::FinishedLength: return "finished_length";
    case RequestStatus::FinishedAborted: return "finished_aborted";
    case RequestStatus::FinishedError: return "finished_error";
  }
  return "?";
}

bool is_finished(RequestStatus status) { return status >= RequestStatus::FinishedStopped; }

RequestStatus finished_status(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return RequestStatus::FinishedStopped;
    case FinishReason::Length: return RequestStatus::FinishedLength;
    case FinishReason::Abort: return RequestStatus::FinishedAborted;
    case FinishReason::Error:
    case FinishReason::None: break;
  }
  return RequestStatus::FinishedError;
}

Request::Request(RequestParams params, uint64_t arrival, int32_t max_model_len, int32_t block_size,
                 std::optional<int32_t> shift_keep)
    : params_(std::move(params)),
      arrival_(arrival),
      max_model_len_(max_model_len),
      block_size_(block_size),
      num_prompt_tokens_(static_cast<int32_t>(params_.prompt.size())),
      tokens_(std::move(params_.prompt)),
      shift_keep_(shift_keep) {
  params_.prompt.clear();  // moved into tokens_
  extend_block_hashes(tokens_, block_size_, params_.cache_key, block_hashes_);
}

FinishReason Request::check_stop() const {
  if (num_generated_ == 0) return FinishReason::None;
  const int32_t last = tokens_.back();
  if (num_generated_ >= params_.min_tokens &&
      std::find(params_.stop_token_ids.begin(), params_.stop_token_ids.end(), last) !=
          params_.stop_token_ids.end())
    return FinishReason::Stop;
  if (num_generated_ >= params_.max_tokens) return FinishReason::Length;
  // With context shift the scheduler makes room instead (Scheduler::schedule).
  if (num_tokens() >= max_model_len_ && !shift_keep_) return FinishReason::Length;
  return FinishReason::None;
}

FinishReason Request::append_output(int32_t token) {
  tokens_.push_back(token);
  ++num_generated_;
  extend_block_hashes(tokens_, block_size_, params_.cache_key, block_hashes_);
  return check_stop();
}

void Request::replace_last_output(int32_t token) {
  TM_ASSERT(num_output_tokens() > 0);
  TM_ASSERT(num_computed_tokens < num_tokens(), "the last token is already in the KV cache");
  tokens_.back() = token;
  // Only a block completed by the last token carries it in its key.
  if (num_tokens() % block_size_ == 0) {
    block_hashes_.pop_back();
    extend_block_hashes(tokens_, block_size_, params_.cache_key, block_hashes_);
  }
}

int32_t Request::shift_context() {
  TM_ASSERT(shift_keep_.has_value(), "context shift is off for this request");
  const int32_t n = num_tokens();
  if (n < 2) return 0;
  int32_t keep = *shift_keep_ < 0 ? num_prompt_tokens_ : *shift_keep_;
  keep = std::clamp(keep, 0, std::min(max_model_len_ / 2, n - 2));
  const int32_t discard = (n - keep) / 2;
  if (discard < 1) return 0;
  tokens_.erase(tokens_.begin() + keep, tokens_.begin() + keep + discard);
  // The prompt loses the discarded tokens that were part of it.
  const int32_t from_prompt = std::max(0, std::min(keep + discard, num_prompt_tokens_) - keep);
  num_prompt_tokens_ -= from_prompt;
  block_hashes_.clear();  // positions moved: every block after the kept ones has new contents
  extend_block_hashes(tokens_, block_size_, params_.cache_key, block_hashes_);
  num_computed_tokens = 0;
  ++num_context_shifts_;
  return discard;
}

Request Request::fork_as(RequestId child_id, uint64_t arrival) const {
  Request child = *this;
  child.params_.id = child_id;
  child.arrival_ = arrival;
  child.num_preemptions = 0;
  return child;
}

}  // namespace tmill
