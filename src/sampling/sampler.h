// Turning logits into the next token: logit bias, repetition/presence/frequency penalties,
// temperature, min_p, top_k, top_p, seeded random choice, and logprobs with top alternatives.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
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
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;           // of the chosen token under the model's raw distribution
  std::vector<TokenLogprob> top;  // most likely tokens, best first (when logprobs >= 0)
};

// xoshiro256** seeded through splitmix64: small, fast, and the same sequence on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1)

 private:
  uint64_t s_[4];
};

// A seed from the OS, for requests without one.
uint64_t random_seed();

class Sampler {
 public:
  SampleResult sample(const float* logits, int32_t n_vocab, const SamplingParams& p, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, Rng& rng);

  // log-softmax of raw logits (logprobs, evaluation).
  static void log_softmax(const float* logits, int32_t n, std::vector<float>& out);

 private:
  void apply_penalties(float* w, int32_t n, const SamplingParams& p, std::span<const int32_t> prompt,
                       std::span<const int32_t> output);
  int32_t draw(float* w, int32_t n, const SamplingParams& p, Rng& rng);

  std::vector<float> work_;
  std::vector<std::pair<float, int32_t>> cand_, kept_;
  std::vector<float> lsm_;
  std::vector<int32_t> counts_;   // per token: occurrences in the output (kept all-zero between calls)
  std::vector<uint8_t> seen_;     // per token: repetition penalty applied (kept all-zero between calls)
  std::vector<int32_t> touched_;
};

}  // namespace tmill
