// Turning logits into the next token: logit bias, repetition/presence/frequency penalties,
// temperature, min_p, top_k, top_p, seeded random choice, and logprobs with top alternatives.
// SamplingParams and SampleResult are the engine API's plain types (src/api/sampling.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "api/sampling.h"

namespace tmill {

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
  // `raw`, when given, is the row logprobs describe (structured output samples from a masked copy
  // of the model's row and reports the model's own distribution, as vLLM's default raw logprobs).
  SampleResult sample(const float* logits, int32_t n_vocab, const SamplingParams& p, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, Rng& rng, const float* raw = nullptr);
  // Speculative decoding: the token for a position a draft token was proposed for. Greedy: sample()'s
  // token, *accepted when it is the draft. Otherwise the rejection rule for a draft proposed with
  // certainty: the draft with probability p(draft) under the distribution sample() draws from (bias,
  // penalties, temperature, min_p, top_k, top_p), else a token from p without the draft, so the
  // result follows p exactly. `raw` as for sample() (a constrained row: the masked copy is `logits`).
  SampleResult verify(const float* logits, int32_t n_vocab, const SamplingParams& p, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, int32_t draft, Rng& rng, bool* accepted,
                      const float* raw = nullptr);
  // Fills r.logprob and r.top (k alternatives) for r.token from a logits row.
  void fill_logprobs(const float* logits, int32_t n_vocab, int32_t k, SampleResult& r);

  // log-softmax of raw logits (logprobs, evaluation).
  static void log_softmax(const float* logits, int32_t n, std::vector<float>& out);

 private:
  void apply_penalties(float* w, int32_t n, const SamplingParams& p, std::span<const int32_t> prompt,
                       std::span<const int32_t> output);
  int32_t draw(float* w, int32_t n, const SamplingParams& p, Rng& rng);
  // cand_ = the tokens draw() may pick, with their unnormalized probabilities.
  void candidates(float* w, int32_t n, const SamplingParams& p);
  int32_t pick(Rng& rng) const;  // one of cand_, in proportion to its weight

  std::vector<float> work_;
  std::vector<std::pair<float, int32_t>> cand_, kept_;
  std::vector<float> lsm_;
  std::vector<int32_t> counts_;   // per token: occurrences in the output (kept all-zero between calls)
  std::vector<uint8_t> seen_;     // per token: repetition penalty applied (kept all-zero between calls)
  std::vector<int32_t> touched_;
};

}  // namespace tmill
