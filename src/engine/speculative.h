// Speculative decoding in the engine (docs/speculative.md). Before each schedule the engine asks a
// proposer for up to k draft tokens per decoding sequence (propose_drafts, speculative.cpp); the
// scheduler scores them with the sequence's decode as one chunk of 1 + k positions in the same
// forward as everyone else's work; sample_step verifies them row by row (greedy: the token the
// sampler would pick; temperature > 0: the rejection rule of Sampler::verify), and the scheduler's
// update keeps the accepted prefix plus one token and rolls back the rest.
//
// Proposers: prompt lookup ("ngram": the continuation of the latest earlier occurrence of the
// sequence's last n tokens, n from prompt_lookup_max down to prompt_lookup_min), a draft model
// ("draft_model", spec_draft.cpp: a small GGUF with the same tokenizer and its own paged KV cache)
// and the test proposer "replay" (a known continuation with a set per-token error rate).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "api/config.h"
#include "core/result.h"
#include "sampling/sampler.h"

namespace tmill {

class Model;
class Tokenizer;
class ThreadPool;

// One sequence's speculation state (its choice owns it).
struct SpecState {
  double accept = 0.7;    // running estimate of the chance that a draft token is accepted, given
                          // that the one before it was (exponential average over verified positions)
  int32_t off_steps = 0;  // steps left without drafts (speculation did not pay)
  Rng rng;                // the replay proposer's errors
};

// What a proposer drafts for: one decoding sequence.
struct DraftJob {
  uint64_t seq = 0;                             // scheduler request id
  std::span<const int32_t> tokens;              // prompt + outputs so far
  int32_t num_output_tokens = 0;
  int32_t k = 0;                                // most draft tokens wanted (>= 1)
  const std::vector<int32_t>* replay = nullptr; // replay: the continuation (GenerateRequest::debug_replay_tokens)
  SpecState* state = nullptr;
  std::vector<int32_t> drafts;                  // out: at most k tokens (none: no proposal)
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Fills jobs[i].drafts for every job (a draft model computes them as one batch).
  virtual void propose(std::vector<DraftJob>& jobs) = 0;
  // The sequence ended: drop what the proposer keeps for it.
  virtual void release(uint64_t seq) { (void)seq; }
};

// Prompt lookup: the tokens that followed the latest earlier occurrence of the last n tokens, for
// the largest n in [min_n, max_n] that occurs, at most k of them (empty when none matches).
std::vector<int32_t> ngram_propose(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k);

// The configured proposer; errors name what is wrong (method "mtp", a draft model whose tokenizer
// differs from the target's, k < 1, ...). target_vocab: token ids valid for the target.
Result<std::unique_ptr<Proposer>> make_proposer(const SpeculativeConfig& config, const Tokenizer& target_tokenizer,
                                                int32_t target_vocab, int32_t block_size, ThreadPool* pool);
// spec_draft.cpp
Result<std::unique_ptr<Proposer>> make_draft_model_proposer(const SpeculativeConfig& config,
                                                            const Tokenizer& target_tokenizer, int32_t target_vocab,
                                                            int32_t block_size, ThreadPool* pool);

// Adaptive k: the draft length that maximizes expected tokens per unit of step cost, given the
// sequence's acceptance estimate (0: not worth drafting now). k_max when adaptation is off.
int32_t choose_k(SpecState& s, int32_t k_max, bool adaptive);
// After a verification: `drafted` tokens scored, the first `accepted` of them kept.
void record_verification(SpecState& s, int32_t drafted, int32_t accepted, bool adaptive);

}  // namespace tmill
