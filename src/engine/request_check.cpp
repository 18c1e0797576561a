// The engine's front door: every limit a request must respect, checked in one place with one set of
// messages. Front ends call it (through Engine::check, or check_request before they hold an engine)
// to answer with the field at fault; Engine::submit calls it again, so nothing unchecked reaches the
// scheduler, which asserts these as invariants.
#include <cmath>

#include <fmt/format.h>

#include "engine/engine.h"

namespace tmill {

namespace {

RequestProblem invalid(std::string field, std::string message) {
  return {RequestProblem::Kind::Invalid, std::move(field), std::move(message)};
}

std::optional<RequestProblem> check_token_ids(const std::vector<int32_t>& ids, const char* field, int32_t n_vocab) {
  for (int32_t t : ids)
    if (t < 0 || t >= n_vocab)
      return invalid(field, fmt::format("'{}' has token id {}, outside the vocabulary [0, {})", field, t, n_vocab));
  return std::nullopt;
}

std::optional<RequestProblem> check_sampling(const SamplingParams& sp, int32_t n_vocab) {
  if (!(sp.temperature >= 0)) return invalid("temperature", "'temperature' must not be negative");
  if (!(sp.top_p > 0 && sp.top_p <= 1)) return invalid("top_p", "'top_p' must be in (0, 1]");
  if (!(sp.min_p >= 0 && sp.min_p <= 1)) return invalid("min_p", "'min_p' must be in [0, 1]");
  if (!(sp.repetition_penalty > 0)) return invalid("repetition_penalty", "'repetition_penalty' must be positive");
  if (!(sp.presence_penalty >= -2 && sp.presence_penalty <= 2))
    return invalid("presence_penalty", "'presence_penalty' must be in [-2, 2]");
  if (!(sp.frequency_penalty >= -2 && sp.frequency_penalty <= 2))
    return invalid("frequency_penalty", "'frequency_penalty' must be in [-2, 2]");
  for (const auto& [id, bias] : sp.logit_bias) {
    if (id < 0 || id >= n_vocab)
      return invalid("logit_bias", fmt::format("logit_bias key '{}' is not a token id in [0, {})", id, n_vocab));
    if (!(bias >= -100 && bias <= 100)) return invalid("logit_bias", "logit_bias values must be between -100 and 100");
  }
  if (sp.logprobs < -1) return invalid("logprobs", "'logprobs' must not be negative");
  return std::nullopt;
}

RequestProblem context_problem(std::string field, std::string message) {
  return {RequestProblem::Kind::ContextLength, std::move(field), std::move(message)};
}

}  // namespace

std::optional<RequestProblem> check_request(const GenerateRequest& r, const RequestLimits& limits) {
  const int64_t len = static_cast<int64_t>(r.prompt.size());
  const int64_t max_len = limits.max_model_len;
  if (len == 0) return invalid("prompt", "The prompt produces no tokens");
  if (auto p = check_token_ids(r.prompt, "prompt", limits.n_vocab)) return p;
  if (len >= max_len)
    return context_problem("prompt", fmt::format("This model's maximum context length is {} tokens. However, your "
                                                 "request has {} input tokens.",
                                                 max_len, len));
  if (r.n < 1) return invalid("n", fmt::format("'n' must be at least 1, got {}", r.n));
  if (r.max_tokens < 1) return invalid("max_tokens", fmt::format("'max_tokens' must be at least 1, got {}", r.max_tokens));
  if (r.min_tokens < 0) return invalid("min_tokens", "'min_tokens' must not be negative");
  if (r.min_tokens > r.max_tokens)
    return invalid("min_tokens",
                   fmt::format("'min_tokens' ({}) must not exceed max_tokens ({})", r.min_tokens, r.max_tokens));
  for (const std::string& s : r.stop)
    if (s.empty()) return invalid("stop", "stop strings must not be empty");
  if (auto p = check_token_ids(r.stop_token_ids, "stop_token_ids", limits.n_vocab)) return p;
  if (auto p = check_sampling(r.sampling, limits.n_vocab)) return p;
  if (r.priority != 0 && !limits.priority_scheduling)
    return invalid("priority", "'priority' needs the priority scheduling policy (--scheduling-policy priority)");
  if (!std::isfinite(r.lora_scale)) return invalid("lora_scale", "'lora_scale' must be a finite number");
  if (r.queue_timeout_s < 0) return invalid("queue_timeout_s", "the queue timeout must not be negative");
  if (!limits.context_shift && len + r.max_tokens > max_len)
    return context_problem("max_tokens", fmt::format("This model's maximum context length is {} tokens. However, you "
                                                     "requested {} tokens ({} in the prompt, {} in the completion).",
                                                     max_len, len + r.max_tokens, len, r.max_tokens));
  return std::nullopt;
}

}  // namespace tmill
