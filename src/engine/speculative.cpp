// Speculative decoding: the --speculative-config JSON, the prompt-lookup and replay proposers,
// adaptive k, and the step's proposing phase (propose_drafts). Verification is in sample_step.cpp,
// the draft model in spec_draft.cpp.
#include "engine/speculative.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/engine_impl.h"
#include "model/config.h"

namespace tmill {

namespace {

constexpr double kAcceptStep = 0.15;     // weight of one verified position in the acceptance estimate
constexpr double kDraftTokenCost = 0.1;  // cost of scoring one more draft token, in plain decode steps
constexpr double kMinGain = 1.05;        // expected tokens per unit of cost below this: stop drafting
constexpr int32_t kOffSteps = 16;        // ... for this many steps, then try again
constexpr double kRetryAccept = 0.35;    // the estimate a sequence retries with

class NgramProposer final : public Proposer {
 public:
  NgramProposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {}
  void propose(std::vector<DraftJob>& jobs) override {
    for (DraftJob& j : jobs) j.drafts = ngram_propose(j.tokens, min_n_, max_n_, j.k);
  }

 private:
  int32_t min_n_, max_n_;
};

// The test proposer: the known continuation from the sequence's next output on, each token replaced
// by another with probability error_rate (a zero-cost proposer of controlled acceptance).
class ReplayProposer final : public Proposer {
 public:
  ReplayProposer(double error_rate, int32_t n_vocab) : error_rate_(error_rate), n_vocab_(n_vocab) {}
  void propose(std::vector<DraftJob>& jobs) override {
    for (DraftJob& j : jobs) {
      if (!j.replay) continue;
      const auto from = static_cast<size_t>(j.num_output_tokens);
      for (size_t i = from; i < j.replay->size() && static_cast<int32_t>(j.drafts.size()) < j.k; ++i) {
        int32_t t = (*j.replay)[i];
        if (error_rate_ > 0 && j.state->rng.uniform() < error_rate_)
          t = static_cast<int32_t>((static_cast<uint64_t>(t) + 1 + j.state->rng.next() % static_cast<uint64_t>(n_vocab_ - 1)) %
                                   static_cast<uint64_t>(n_vocab_));
        j.drafts.push_back(t);
      }
    }
  }

 private:
  double error_rate_;
  int32_t n_vocab_;
};

// Expected tokens a verification of k drafts yields (accepted drafts + the one of its own) when each
// draft is accepted with probability a given the previous one was: 1 + a + ... + a^k.
double expected_tokens(double a, int32_t k) {
  double sum = 1, p = 1;
  for (int32_t i = 0; i < k; ++i) sum += (p *= a);
  return sum;
}

// method mtp / eagle / eagle3 / medusa: which GGUF files carry such heads, and that tokenmill's
// families do not (docs/speculative.md, "MTP / EAGLE heads").
std::string heads_not_supported(const std::string& method) {
  std::string families;
  for (const std::string& a : known_archs()) families += (families.empty() ? "" : ", ") + a;
  std::string why;
  if (method == "mtp")
    why = "MTP heads reach a GGUF only as llama.cpp's NextN layers (extra blocks blk.N.nextn.*, counted by "
          "<arch>.nextn_predict_layers), which its converter keeps for glm4moe (GLM-4.5/4.6) and deepseek32 "
          "(DeepSeek-V3.2) and drops for deepseek2 (DeepSeek-V3/R1); tokenmill runs glm4moe (and deepseek2) without "
          "a NextN block (it does not run MTP heads yet) and does not load deepseek32, and its families (" +
          families + ") have no other MTP heads";
  else if (method == "medusa")
    why = "Medusa heads have no GGUF form (llama.cpp converts none), and tokenmill's families (" + families +
          ") have none";
  else
    why = "EAGLE heads are a separate checkpoint (in llama.cpp a GGUF of its own, architecture eagle3) that "
          "tokenmill does not read; its families (" + families + ") carry no such head";
  return fmt::format("speculative config: method \"{}\" is not supported: {}. Use \"ngram\" (prompt lookup) or "
                     "\"draft_model\" with a small GGUF that has the same tokenizer",
                     method, why);
}

}  // namespace

std::vector<int32_t> ngram_propose(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k) {
  const auto len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n && n >= 1; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // latest earlier occurrence: start positions len-n-1 down to 0
    for (int64_t s = len - n - 1; s >= 0; --s) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + s)) continue;
      const int64_t from = s + n, to = std::min(len, from + k);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

int32_t choose_k(SpecState& s, int32_t k_max, bool adaptive) {
  if (!adaptive) return k_max;
  if (s.off_steps > 0) {
    if (--s.off_steps > 0) return 0;
    s.accept = std::max(s.accept, kRetryAccept);
  }
  int32_t best_k = 0;
  double best = 1.0;
  for (int32_t k = 1; k <= k_max; ++k) {
    const double gain = expected_tokens(s.accept, k) / (1.0 + kDraftTokenCost * k);
    if (gain > best) best = gain, best_k = k;
  }
  if (best < kMinGain) {
    s.off_steps = kOffSteps;
    return 0;
  }
  return best_k;
}

void record_verification(SpecState& s, int32_t drafted, int32_t accepted, bool adaptive) {
  if (!adaptive) return;
  for (int32_t i = 0; i < accepted; ++i) s.accept += kAcceptStep * (1.0 - s.accept);
  if (accepted < drafted) s.accept -= kAcceptStep * s.accept;  // the first rejected position
}

Result<std::unique_ptr<Proposer>> make_proposer(const SpeculativeConfig& c, const Tokenizer& tok, int32_t target_vocab,
                                                int32_t block_size, ThreadPool* pool) {
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > 64)
    return Error{"speculative config: num_speculative_tokens must be in [1, 64]"};
  if (c.disable_by_batch_size < 0) return Error{"speculative config: disable_by_batch_size must not be negative"};
  if (c.method == "ngram") {
    if (c.prompt_lookup_min < 1 || c.prompt_lookup_max < c.prompt_lookup_min)
      return Error{"speculative config: need 1 <= prompt_lookup_min <= prompt_lookup_max"};
    return std::unique_ptr<Proposer>(new NgramProposer(c.prompt_lookup_min, c.prompt_lookup_max));
  }
  if (c.method == "draft_model") return make_draft_model_proposer(c, tok, target_vocab, block_size, pool);
  if (c.method == "replay") {
    if (!(c.replay_error_rate >= 0 && c.replay_error_rate <= 1))
      return Error{"speculative config: replay_error_rate must be in [0, 1]"};
    return std::unique_ptr<Proposer>(new ReplayProposer(c.replay_error_rate, target_vocab));
  }
  if (c.method == "mtp" || c.method == "eagle" || c.method == "eagle3" || c.method == "medusa")
    return Error{heads_not_supported(c.method)};
  return Error{fmt::format("speculative config: unknown method \"{}\" (ngram, draft_model)", c.method)};
}

Result<SpeculativeConfig> parse_speculative_config(std::string_view text) {
  SpeculativeConfig c;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return Error{fmt::format("--speculative-config: not JSON: {}", e.what())};
  }
  if (!j.is_object()) return Error{"--speculative-config: expected a JSON object"};
  try {
    for (auto& [key, v] : j.items()) {
      if (key == "method") c.method = v.get<std::string>();
      else if (key == "model") c.model = v.get<std::string>();
      else if (key == "num_speculative_tokens") c.num_speculative_tokens = v.get<int32_t>();
      else if (key == "prompt_lookup_max") c.prompt_lookup_max = v.get<int32_t>();
      else if (key == "prompt_lookup_min") c.prompt_lookup_min = v.get<int32_t>();
      else if (key == "disable_by_batch_size") c.disable_by_batch_size = v.is_null() ? 0 : v.get<int32_t>();
      else if (key == "adaptive") c.adaptive = v.get<bool>();
      else if (key == "replay_error_rate") c.replay_error_rate = v.get<double>();
      else return Error{fmt::format("--speculative-config: unknown key \"{}\"", key)};
    }
  } catch (const std::exception& e) {
    return Error{fmt::format("--speculative-config: {}", e.what())};
  }
  // vLLM: a model implies draft_model; tokenmill also takes prompt_lookup_* alone as ngram.
  if (c.method.empty() && !c.model.empty()) c.method = "draft_model";
  if (c.method.empty() && (c.prompt_lookup_max > 0 || c.prompt_lookup_min > 0)) c.method = "ngram";
  if (c.method.empty()) return Error{"--speculative-config: no method (ngram, draft_model) and no model"};
  if (c.method == "draft_model" && c.model.empty()) return Error{"--speculative-config: draft_model needs \"model\""};
  if (c.method == "ngram") {  // vLLM's defaults: 5 and 5, or the one given for both
    if (c.prompt_lookup_min == 0 && c.prompt_lookup_max == 0) c.prompt_lookup_min = c.prompt_lookup_max = 5;
    if (c.prompt_lookup_min == 0) c.prompt_lookup_min = c.prompt_lookup_max;
    if (c.prompt_lookup_max == 0) c.prompt_lookup_max = c.prompt_lookup_min;
  }
  if (c.num_speculative_tokens == 0) c.num_speculative_tokens = 4;
  return c;
}

// Drafts for the running sequences whose next step is a decode, unless too many sequences decode
// (the batch already keeps the cores busy) or the request opted out. A constrained sequence's drafts
// are cut at the first token its grammar refuses (allowed_draft_prefix, on a copy of its state):
// those would only be rejected, and its verification masks each row (sample_step.cpp).
void Engine::Impl::propose_drafts() {
  if (!proposer) return;
  const SpeculativeConfig& sc = config.speculative;
  const std::vector<RequestId>& running = sched->running();
  auto decodes = [&](RequestId id) {
    const Request* r = sched->request(id);
    return r->num_tokens() - r->num_computed_tokens == 1;
  };
  if (sc.disable_by_batch_size > 0 &&
      std::count_if(running.begin(), running.end(), decodes) > sc.disable_by_batch_size)
    return;
  std::vector<DraftJob> jobs;
  std::vector<const ChoiceConstraint*> constraints;  // per job (null: free text)
  for (RequestId id : running) {
    if (!decodes(id)) continue;
    const Request* r = sched->request(id);
    auto it = choices.find(id);
    if (it == choices.end()) continue;
    Choice& c = *it->second;
    const GenerateRequest& req = c.group->req;
    if (!req.speculative || (c.constraint && c.constraint->dead)) continue;
    // Drafts past max_tokens or the context would be thrown away.
    const int32_t room = std::min(req.max_tokens - r->num_output_tokens(), r->max_model_len() - r->num_tokens()) - 1;
    const int32_t k = std::min(choose_k(c.spec, sc.num_speculative_tokens, sc.adaptive), room);
    if (k < 1) continue;
    DraftJob j;
    j.seq = id;
    j.tokens = r->tokens();
    j.num_output_tokens = r->num_output_tokens();
    j.k = k;
    j.replay = &req.debug_replay_tokens;
    j.state = &c.spec;
    jobs.push_back(std::move(j));
    constraints.push_back(c.constraint.get());
  }
  if (jobs.empty()) return;
  proposer->propose(jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    DraftJob& j = jobs[i];
    if (constraints[i] && !j.drafts.empty())
      j.drafts.resize(allowed_draft_prefix(*constraints[i], *tokenizer, j.drafts));
    if (!j.drafts.empty()) sched->set_draft_tokens(j.seq, std::move(j.drafts));
  }
}

}  // namespace tmill
