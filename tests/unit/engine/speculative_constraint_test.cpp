// Speculative decoding of structured-output requests on stories260K: drafts are cut at the first
// token the grammar refuses, each verified position is masked with the grammar state after the
// drafts before it, and only kept tokens advance the request's grammar. Greedy outputs (tokens,
// text, finish reasons, logprobs) are identical with and without speculation for JSON schema,
// choice, regex, GBNF and `after` constraints, alone and batched with free requests; a rejected
// draft never moves the grammar; at temperature > 0 the masked rejection rule keeps the
// distribution of the constrained output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

#include "engine/engine.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;

namespace {

std::string stories_path() { return test::source_path("models/stories260K/stories260K.gguf"); }

std::unique_ptr<Engine> make_engine(const SpeculativeConfig& spec, int32_t budget = 4096, uint64_t kv_bytes = 0) {
  EngineConfig c;
  c.model_path = stories_path();
  c.threads = 2;
  c.max_num_batched_tokens = budget;
  c.kv_cache_bytes = kv_bytes;
  c.max_num_seqs = 32;
  c.speculative = spec;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  return e.ok() ? std::move(e).value() : nullptr;
}

SpeculativeConfig spec_of(const std::string& method, int32_t k, double error_rate = 0.3) {
  SpeculativeConfig s;
  s.method = method;
  s.num_speculative_tokens = k;
  s.prompt_lookup_min = 1;
  s.prompt_lookup_max = 3;
  s.replay_error_rate = error_rate;
  s.adaptive = false;           // draft every step
  s.disable_by_batch_size = 0;  // also in the batch of all requests
  return s;
}

struct Out {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::None;
  std::vector<SampleResult> logprobs;
};

std::vector<Out> run_all(Engine& e, const std::vector<GenerateRequest>& reqs) {
  std::vector<Out> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    Out* o = &out[i];
    auto id = e.submit(reqs[i], [o](const RequestOutput& r) {
      o->tokens.insert(o->tokens.end(), r.token_ids.begin(), r.token_ids.end());
      o->text += r.text;
      o->logprobs.insert(o->logprobs.end(), r.logprobs.begin(), r.logprobs.end());
      if (r.finished) o->finish = r.finish_reason;
    });
    EXPECT_TRUE(id.ok()) << id.error();
  }
  e.run_until_idle();
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_NE(out[i].finish, FinishReason::None) << "request " << i;
  return out;
}

GenerateRequest request(Engine& e, const std::string& prompt, int32_t max_tokens) {
  GenerateRequest r;
  r.prompt = e.tokenizer()->encode(prompt, true, false);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

OutputConstraint constraint(OutputConstraint::Kind kind, std::string text, std::vector<std::string> choices = {}) {
  OutputConstraint c;
  c.kind = kind;
  c.text = std::move(text);
  c.choices = std::move(choices);
  return c;
}

// Tokens that spell `text` exactly (longest vocabulary match first): drafts the grammar allows
// wherever `text` may follow, whatever the tokenizer's own split would be.
std::vector<int32_t> spell(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> out;
  for (size_t at = 0; at < text.size();) {
    int32_t best = -1;
    size_t len = 0;
    for (int32_t t = 0; t < tok.n_vocab(); ++t) {
      const std::string& b = tok.token_bytes(t);
      if (b.size() > len && text.compare(at, b.size(), b) == 0) best = t, len = b.size();
    }
    EXPECT_GE(best, 0) << "no token spells " << text.substr(at);
    if (best < 0) break;
    out.push_back(best);
    at += len;
  }
  return out;
}

const char* kSchema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
    "age":{"type":"integer","minimum":0,"maximum":120},"pet":{"enum":["cat","dog"]}},
    "required":["name","age","pet"],"additionalProperties":false})";

// Constrained requests of every kind, and free ones, some with prompts that prompt lookup can copy.
std::vector<GenerateRequest> mixed_requests(Engine& e) {
  using K = OutputConstraint::Kind;
  std::vector<GenerateRequest> reqs;
  GenerateRequest r = request(e, "Once upon a time", 80);
  r.constraint = constraint(K::JsonSchema, kSchema);
  reqs.push_back(r);
  // a prompt that shows the JSON the schema asks for, twice: prompt lookup drafts from it
  r = request(e, R"({"name":"Tom","age":3,"pet":"cat"} {"name":"Tom","age":3,"pet":"cat"} )", 80);
  r.constraint = constraint(K::JsonSchema, kSchema);
  r.sampling.logprobs = 2;  // verified rows report the model's own distribution, as unspeculated ones
  reqs.push_back(r);
  r = request(e, "The dog", 30);
  r.constraint = constraint(K::Choice, "", {"a big red dog ran home", "a big cat sat on a mat", "yes"});
  reqs.push_back(r);
  r = request(e, "Once upon a time", 50);
  r.constraint = constraint(K::Regex, "[a-z ]{8,40}\\.");
  reqs.push_back(r);
  r = request(e, "Lily and Tom", 40);
  r.constraint = constraint(K::Grammar, "root ::= [a-z]+ \" \" [0-9] [0-9]\n");
  reqs.push_back(r);
  r = request(e, "The cat saw the cat saw the cat", 30);  // free, repetitive
  reqs.push_back(r);
  r = request(e, "Once upon a time", 40);
  r.constraint = constraint(K::JsonObject, "");
  r.sampling.repetition_penalty = 1.3f;  // penalties see the accepted drafts, under the mask too
  reqs.push_back(r);
  r = request(e, "One day", 25);  // free
  reqs.push_back(r);
  {  // `after`: free text up to the free output's first 4 tokens, then a choice
    GenerateRequest free = request(e, "Once upon a time", 30);
    const Out f = run_all(e, {free})[0];
    EXPECT_GE(f.tokens.size(), 6u);
    r = free;
    r.constraint = constraint(K::Choice, "", {" and a dog", " and a cat ran"});
    r.constraint.after = e.tokenizer()->decode_continuation(std::span(f.tokens).first(4));
    reqs.push_back(r);
  }
  return reqs;
}

struct Method {
  std::string name;
  std::string method;
};

}  // namespace

class SpecConstrained : public ::testing::TestWithParam<Method> {};

// Greedy: the same tokens, text, finish and logprobs with speculation as without, for each request
// alone (prefix hits on the prompts seen before), for all of them batched, with a token budget that
// cuts drafts, and with a KV cache small enough to preempt (constrained sequences recomputed).
TEST_P(SpecConstrained, GreedyOutputIsTokenIdentical) {
  auto plain = make_engine({});
  std::vector<GenerateRequest> reqs = mixed_requests(*plain);
  std::vector<Out> want;
  for (auto& r : reqs) want.push_back(run_all(*plain, {r})[0]);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].debug_replay_tokens = want[i].tokens;
  // the outputs follow their constraints (what the test relies on)
  ASSERT_EQ(want[2].finish, FinishReason::Stop) << want[2].text;
  EXPECT_TRUE(std::regex_match(want[3].text, std::regex("[a-z ]{8,40}\\."))) << want[3].text;
  EXPECT_TRUE(std::regex_match(want[4].text, std::regex("[a-z]+ [0-9][0-9]"))) << want[4].text;
  auto loaded = Model::load(stories_path());
  ASSERT_TRUE(loaded.ok());
  const ModelConfig& cfg = (*loaded)->config();
  const uint64_t per_token = 2ull * cfg.n_layer * cfg.n_head_kv * cfg.head_dim * 4;
  struct Variant {
    const char* name;
    int32_t budget;
    uint64_t kv_bytes;
    bool alone;
  };
  for (const Variant v : {Variant{"alone", 4096, 0, true}, Variant{"batched", 4096, 0, false},
                          Variant{"budget6", 6, 0, false}, Variant{"preempt", 64, per_token * 16 * 12, false}}) {
    SpeculativeConfig spec = spec_of(GetParam().method, 4);
    if (spec.method == "draft_model") spec.model = stories_path();  // the model drafts for itself, unmasked
    auto e = make_engine(spec, v.budget, v.kv_bytes);
    ASSERT_TRUE(e);
    std::vector<Out> got;
    uint64_t constrained_drafts = 0;
    if (v.alone) {
      for (size_t i = 0; i < reqs.size(); ++i) {
        const uint64_t before = e->stats().spec_num_drafts;
        got.push_back(run_all(*e, {reqs[i]})[0]);
        if (reqs[i].constraint.active()) constrained_drafts += e->stats().spec_num_drafts - before;
      }
    } else {
      got = run_all(*e, reqs);
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << v.name << " request " << i << ": " << got[i].text;
      EXPECT_EQ(got[i].text, want[i].text) << v.name << " request " << i;
      EXPECT_EQ(got[i].finish, want[i].finish) << v.name << " request " << i;
      ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size()) << v.name << " request " << i;
      for (size_t t = 0; t < got[i].logprobs.size(); ++t) {
        EXPECT_EQ(got[i].logprobs[t].token, want[i].logprobs[t].token);
        EXPECT_NEAR(got[i].logprobs[t].logprob, want[i].logprobs[t].logprob, 1e-4) << v.name << " token " << t;
        ASSERT_EQ(got[i].logprobs[t].top.size(), 2u);
        EXPECT_EQ(got[i].logprobs[t].top[0].token, want[i].logprobs[t].top[0].token);
      }
    }
    const EngineStats st = e->stats();
    if (v.alone) {
      EXPECT_GT(constrained_drafts, 0u) << "constrained requests did not speculate";
    }
    EXPECT_GT(st.spec_num_accepted_tokens, 0u) << v.name;
    if (spec.method != "draft_model") {  // the model drafting for itself may be right every time
      EXPECT_LT(st.spec_num_accepted_tokens, st.spec_num_draft_tokens) << v.name;  // some rejected
    }
    if (std::string(v.name) == "preempt") {
      EXPECT_GT(st.num_preemptions, 0u);
    }
    EXPECT_EQ(st.kv.usage, 0.0) << v.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Proposers, SpecConstrained,
                         ::testing::Values(Method{"ngram", "ngram"}, Method{"replay", "replay"},
                                           Method{"draft_self", "draft_model"}),
                         [](const auto& info) { return info.param.name; });

// Two choices that share their first words: the model says one; the drafts spell the other. The
// drafts of the shared words are accepted and the first draft of the other choice, which the
// grammar allows, is rejected. Had that rejected draft advanced the grammar, the rest of the
// output would have been masked toward the other choice (or found nothing allowed).
TEST(SpecConstraint, ARejectedDraftNeverAdvancesTheGrammar) {
  const std::vector<std::string> choices = {"a big red dog ran home", "a big cat sat on a mat"};
  auto plain = make_engine({});
  GenerateRequest r = request(*plain, "The dog", 30);
  r.constraint = constraint(OutputConstraint::Kind::Choice, "", choices);
  const Out want = run_all(*plain, {r})[0];
  ASSERT_EQ(want.finish, FinishReason::Stop);
  const size_t said = want.text == choices[0] ? 0 : 1;
  ASSERT_EQ(want.text, choices[said]);
  // The drafts: the model's own tokens while they spell the other choice too, then that choice.
  const Tokenizer& tok = *plain->tokenizer();
  const std::string& other = choices[1 - said];
  std::string shared;
  size_t m = 0;
  while (m < want.tokens.size() && other.compare(shared.size(), tok.token_bytes(want.tokens[m]).size(),
                                                   tok.token_bytes(want.tokens[m])) == 0)
    shared += tok.token_bytes(want.tokens[m++]);
  ASSERT_GT(m, 0u) << "the choices' shared words are not a token boundary";
  r.debug_replay_tokens.assign(want.tokens.begin(), want.tokens.begin() + static_cast<std::ptrdiff_t>(m));
  for (int32_t t : spell(tok, other.substr(shared.size()))) r.debug_replay_tokens.push_back(t);
  auto e = make_engine(spec_of("replay", 8, 0.0));
  const Out got = run_all(*e, {r})[0];
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.finish, FinishReason::Stop);
  const EngineStats st = e->stats();
  EXPECT_GT(st.spec_num_accepted_tokens, 0u) << "the shared words were not drafted";
  EXPECT_GT(st.spec_num_draft_tokens, st.spec_num_accepted_tokens) << "no grammar-valid draft was rejected";
}

// Temperature 1, choices that start alike and part at their second word, which the masked row
// rates very differently from the model's own row: the chosen texts over many seeds have the same
// distribution with speculation (drafts: the model's own tokens for one of the choices) as without.
// Accepting a draft with its unmasked probability would move most of the mass away from that
// choice. Two-sample chi-square at p < 0.001.
TEST(SpecConstraint, MaskedRejectionRuleKeepsTheDistribution) {
  const std::vector<std::string> choices = {"yes it is", "yes and no", "yes or no", "yes"};
  constexpr int kRuns = 600;
  auto sample_runs = [&](bool spec_on, const std::vector<int32_t>& drafts) {
    auto e = make_engine(spec_of("replay", 4, 0.0));
    std::vector<GenerateRequest> reqs;
    for (int i = 0; i < kRuns; ++i) {
      GenerateRequest r = request(*e, "Once upon a time", 20);
      r.constraint = constraint(OutputConstraint::Kind::Choice, "", choices);
      r.sampling.temperature = 1.0f;
      r.sampling.seed = static_cast<uint64_t>(spec_on ? 100000 + i : i);
      r.speculative = spec_on;
      r.debug_replay_tokens = drafts;
      reqs.push_back(r);
    }
    auto out = run_all(*e, reqs);
    if (spec_on) {
      EXPECT_GT(e->stats().spec_num_accepted_tokens, static_cast<uint64_t>(kRuns));
      EXPECT_LT(e->stats().spec_num_accepted_tokens, e->stats().spec_num_draft_tokens);
    }
    return out;
  };
  const std::vector<Out> base = sample_runs(false, {});
  std::map<std::string, double> base_counts;
  for (const Out& o : base) base_counts[o.text]++;
  // The drafts: the tokens of a run that said the choice closest to a third of the runs.
  const Out* pick = nullptr;
  auto off_third = [&](const Out& o) { return std::abs(base_counts[o.text] - kRuns / 3.0); };
  for (const Out& o : base)
    if (!pick || off_third(o) < off_third(*pick)) pick = &o;
  ASSERT_GT(base_counts[pick->text], kRuns / 10.0) << "the test needs choices the model is unsure about";
  const std::vector<Out> spec = sample_runs(true, pick->tokens);
  std::map<std::string, std::pair<double, double>> both;
  for (const Out& o : base) both[o.text].first++;
  for (const Out& o : spec) both[o.text].second++;
  double chi2 = 0, other_a = 0, other_b = 0;
  int bins = 0;
  for (auto& [t, ab] : both) {
    EXPECT_TRUE(std::find(choices.begin(), choices.end(), t) != choices.end()) << t;
    if (ab.first + ab.second < 10) {  // rare texts share one bin
      other_a += ab.first, other_b += ab.second;
      continue;
    }
    chi2 += (ab.first - ab.second) * (ab.first - ab.second) / (ab.first + ab.second);
    ++bins;
  }
  if (other_a + other_b > 0) {
    chi2 += (other_a - other_b) * (other_a - other_b) / (other_a + other_b);
    ++bins;
  }
  ASSERT_GE(bins, 2);
  const int df = bins - 1;
  const double z = 3.09, h = 2.0 / (9.0 * df);  // chi-square 0.999 quantile (Wilson-Hilferty)
  const double critical = df * std::pow(1 - h + z * std::sqrt(h), 3);
  EXPECT_LT(chi2, critical) << bins << " bins; drafts spell \"" << pick->text << "\"";
}
