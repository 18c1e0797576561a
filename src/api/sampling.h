// The engine's public sampling types: what a request asks of the sampler, and what it reports per
// token (logprobs). Plain data, header-only: `sampling` implements them, `engine` re-exports them.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace tmill {

struct SamplingParams {
  float temperature = 1.0f;  // <= 0: greedy (argmax after bias and penalties)
  float top_p = 1.0f;        // (0, 1]
  int32_t top_k = 0;         // <= 0: disabled
  float min_p = 0.0f;        // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; applies to prompt and output tokens (divides positive logits)
  float presence_penalty = 0.0f;    // subtracted once per distinct output token
  float frequency_penalty = 0.0f;   // subtracted per occurrence in the output
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<uint64_t> seed;
  int32_t logprobs = -1;  // -1: none; k >= 0: the chosen token's logprob and the k most likely tokens

  bool greedy() const { return temperature <= 1e-5f; }
  bool penalties() const { return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f; }
  // The token is the row's plain argmax: greedy with nothing that changes the logits first.
  bool plain_argmax() const { return greedy() && logit_bias.empty() && !penalties(); }
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

// One sampled token with its logprob under the model's raw distribution and, when asked for, the
// most likely alternatives.
struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // most likely tokens, best first (when logprobs >= 0)
};

}  // namespace tmill
