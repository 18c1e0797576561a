#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/ops.h"

namespace tmill {

namespace {
uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Heap order: larger probability first, lower token id first on ties (deterministic).
bool worse(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first < b.first || (a.first == b.first && a.second > b.second);
}
}  // namespace

void Rng::reseed(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

void Sampler::log_softmax(const float* logits, int32_t n, std::vector<float>& out) {
  out.resize(static_cast<size_t>(n));
  float mx = -INFINITY;
  for (int32_t i = 0; i < n; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  for (int32_t i = 0; i < n; ++i) out[i] = logits[i] - lse;
}

void Sampler::apply_penalties(float* w, int32_t n, const SamplingParams& p, std::span<const int32_t> prompt,
                              std::span<const int32_t> output) {
  if (static_cast<int32_t>(counts_.size()) < n) {
    counts_.resize(static_cast<size_t>(n), 0);
    seen_.resize(static_cast<size_t>(n), 0);
  }
  touched_.clear();
  auto in_range = [n](int32_t t) { return t >= 0 && t < n; };
  // Repetition penalty (HF/vLLM): every distinct token of prompt and output, once.
  if (p.repetition_penalty != 1.0f) {
    for (auto span : {prompt, output})
      for (int32_t t : span)
        if (in_range(t) && !seen_[t]) {
          seen_[t] = 1;
          touched_.push_back(t);
          w[t] = w[t] > 0 ? w[t] / p.repetition_penalty : w[t] * p.repetition_penalty;
        }
    for (int32_t t : touched_) seen_[t] = 0;
    touched_.clear();
  }
  // Presence / frequency penalties (OpenAI): over the generated tokens only.
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    for (int32_t t : output)
      if (in_range(t) && counts_[t]++ == 0) touched_.push_back(t);
    for (int32_t t : touched_) {
      w[t] -= p.frequency_penalty * static_cast<float>(counts_[t]) + p.presence_penalty;
      counts_[t] = 0;
    }
  }
}

int32_t Sampler::draw(float* w, int32_t n, const SamplingParams& p, Rng& rng) {
  candidates(w, n, p);
  return pick(rng);
}

int32_t Sampler::pick(Rng& rng) const {
  double sum = 0;
  for (auto& c : cand_) sum += c.first;
  const double u = rng.uniform() * sum;
  double run = 0;
  for (auto& c : cand_) {
    run += c.first;
    if (u < run) return c.second;
  }
  return cand_.back().second;
}

void Sampler::candidates(float* w, int32_t n, const SamplingParams& p) {
  // temperature-scaled, unnormalized probabilities (the max token has weight 1)
  const float inv_t = 1.0f / p.temperature;
  float mx = -INFINITY;
  for (int32_t i = 0; i < n; ++i) mx = std::max(mx, w[i]);
  exp_shift_scale(w, mx, inv_t, w, n);  // vectorized: the vocabulary can be 150k+ wide
  cand_.clear();
  for (int32_t i = 0; i < n; ++i) {
    const float e = w[i];
    if (e > 0 && e >= p.min_p) cand_.emplace_back(e, i);  // min_p: relative to the most likely token
  }
  // top_k then top_p: pop candidates best-first from a heap, which is cheap when few survive.
  const size_t k = p.top_k > 0 ? std::min<size_t>(static_cast<size_t>(p.top_k), cand_.size()) : cand_.size();
  if (k < cand_.size() || p.top_p < 1.0f) {
    std::make_heap(cand_.begin(), cand_.end(), worse);
    kept_.clear();
    auto end = cand_.end();
    for (size_t i = 0; i < k; ++i, --end) {
      std::pop_heap(cand_.begin(), end, worse);
      kept_.push_back(*(end - 1));
    }
    double mass = 0;
    for (auto& c : kept_) mass += c.first;
    const double target = p.top_p * mass;
    double acc = 0;
    size_t keep = 0;
    while (keep < kept_.size()) {
      acc += kept_[keep++].first;
      if (acc >= target) break;
    }
    kept_.resize(keep);
    cand_.swap(kept_);
  }
}

SampleResult Sampler::sample(const float* logits, int32_t n, const SamplingParams& p, std::span<const int32_t> prompt,
                             std::span<const int32_t> output, Rng& rng, const float* raw) {
  SampleResult r;
  if (p.plain_argmax()) {
    r.token = static_cast<int32_t>(argmax(logits, n));  // nothing modifies the logits: no copy
  } else {
    work_.assign(logits, logits + n);
    float* w = work_.data();
    for (auto [tok, bias] : p.logit_bias)
      if (tok >= 0 && tok < n) w[tok] += bias;
    if (p.penalties()) apply_penalties(w, n, p, prompt, output);
    r.token = p.greedy() ? static_cast<int32_t>(argmax(w, n)) : draw(w, n, p, rng);
  }
  if (p.logprobs >= 0) fill_logprobs(raw ? raw : logits, n, p.logprobs, r);
  return r;
}

SampleResult Sampler::verify(const float* logits, int32_t n, const SamplingParams& p, std::span<const int32_t> prompt,
                             std::span<const int32_t> output, int32_t draft, Rng& rng, bool* accepted,
                             const float* raw) {
  if (p.greedy()) {
    SampleResult r = sample(logits, n, p, prompt, output, rng, raw);
    *accepted = r.token == draft;
    return r;
  }
  work_.assign(logits, logits + n);
  float* w = work_.data();
  for (auto [tok, bias] : p.logit_bias)
    if (tok >= 0 && tok < n) w[tok] += bias;
  if (p.penalties()) apply_penalties(w, n, p, prompt, output);
  candidates(w, n, p);
  // The draft was proposed with certainty (q(draft) = 1): accept it with probability p(draft), else
  // draw from p with the draft removed; either way the token follows p exactly.
  double sum = 0, p_draft = 0;
  for (auto& c : cand_) {
    sum += c.first;
    if (c.second == draft) p_draft = c.first;
  }
  SampleResult r;
  *accepted = p_draft > 0 && rng.uniform() * sum < p_draft;
  if (*accepted) {
    r.token = draft;
  } else {
    std::erase_if(cand_, [&](const std::pair<float, int32_t>& c) { return c.second == draft; });
    r.token = cand_.empty() ? draft : pick(rng);
  }
  if (p.logprobs >= 0) fill_logprobs(raw ? raw : logits, n, p.logprobs, r);
  return r;
}

void Sampler::fill_logprobs(const float* logits, int32_t n, int32_t logprobs, SampleResult& r) {
  log_softmax(logits, n, lsm_);
  r.logprob = lsm_[r.token];
  const int32_t k = std::min<int32_t>(logprobs, n);
  cand_.clear();
  for (int32_t i = 0; i < n; ++i) cand_.emplace_back(lsm_[i], i);
  std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(),
                    [](const auto& a, const auto& b) { return worse(b, a); });
  r.top.clear();
  for (int32_t i = 0; i < k; ++i) r.top.push_back({cand_[i].second, cand_[i].first});
}

}  // namespace tmill
