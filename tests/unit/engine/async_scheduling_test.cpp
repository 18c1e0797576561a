// Async scheduling (EngineConfig::async_scheduling, on GPU devices): a step's outputs are processed
// while the next step runs on the device. It must change no output: the same tokens, text, finish
// and stop reasons, token counts and logprobs as with outputs processed between steps, for greedy and
// seeded sampling, stop strings (which end a choice whose next token is already being computed),
// n > 1 forks, constrained choices, logprobs (the host sampler's path) and aborts; and it must free
// every KV block. Run on gpu-oracle (the GPU engine path on the host oracle: fast) and cuda-emu.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;

namespace {

struct ChoiceOut {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::None;
  std::string stop_reason;
  int32_t completion_tokens = -1;
  std::vector<SampleResult> logprobs;
  int32_t finished_outputs = 0;  // outputs flagged finished (exactly one per choice)
};

struct Outputs {
  std::vector<std::vector<ChoiceOut>> requests;  // [request][choice]
  EngineStats stats;
};

std::unique_ptr<Engine> make(const std::string& device, bool async) {
  EngineConfig c;
  c.model_path = test::source_path("models/stories260K/stories260K.gguf");
  c.device = device;
  c.gpu_memory_utilization = 0.25;
  c.threads = 2;
  c.max_num_seqs = 32;
  c.max_num_batched_tokens = 64;  // prompts in chunks beside decodes
  c.async_scheduling = async;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  return std::move(e).value();
}

// abort_at: per request, abort it (from its own callback) once choice 0 has this many tokens (0: never).
Outputs run_requests(Engine& e, const std::vector<GenerateRequest>& reqs, const std::vector<int32_t>& abort_at) {
  Outputs r;
  r.requests.resize(reqs.size());
  std::vector<uint64_t> ids(reqs.size(), 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto* outs = &r.requests[i];
    outs->resize(static_cast<size_t>(reqs[i].n));
    const int32_t at = abort_at[i];
    auto id = e.submit(reqs[i], [outs, at, &e, &ids, i](const RequestOutput& o) {
      ChoiceOut& c = (*outs)[static_cast<size_t>(o.index)];
      c.tokens.insert(c.tokens.end(), o.token_ids.begin(), o.token_ids.end());
      c.text += o.text;
      c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      if (o.finished) {
        c.reason = o.finish_reason;
        c.stop_reason = o.stop_reason;
        c.completion_tokens = o.completion_tokens;
        c.finished_outputs++;
      }
      if (at > 0 && o.index == 0 && !o.finished && static_cast<int32_t>(c.tokens.size()) == at) e.abort(ids[i]);
    });
    EXPECT_TRUE(id.ok()) << id.error();
    ids[i] = *id;
  }
  e.run_until_idle();
  r.stats = e.stats();
  return r;
}

GenerateRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

void expect_async_scheduling_changes_no_output(const std::string& device) {
  auto sync_engine = make(device, false);
  auto async_engine = make(device, true);
  const Tokenizer& tok = *sync_engine->tokenizer();
  // stories260K's greedy text from <s>: "Once upon a time, there was a little girl named Lily. ..."
  std::vector<GenerateRequest> reqs;
  std::vector<int32_t> abort_at;
  auto add = [&](GenerateRequest r, int32_t abort_after = 0) {
    reqs.push_back(std::move(r));
    abort_at.push_back(abort_after);
  };
  add(greedy({1}, 80));                                 // 0: the plain greedy text, to its length
  GenerateRequest stop = greedy({1}, 80);               // 1, 2: a stop string mid-output
  stop.stop = {"little girl"};
  add(stop);
  stop.include_stop_str_in_output = true;
  stop.stop = {"park"};
  add(stop);
  GenerateRequest forks = greedy({1}, 30);              // 3: n = 3 forks, ended by a stop string
  forks.n = 3;
  forks.stop = {"Lily"};
  add(forks);
  GenerateRequest first = greedy({1}, 10);              // 4: a stop string in the first token; n = 2
  first.n = 2;
  first.stop = {"Once"};
  add(first);
  GenerateRequest sampled = greedy(tok.encode("One day, a big dog", true, false), 40);  // 5: seeded sampling, n = 2
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.top_p = 0.95f;
  sampled.sampling.seed = 7;
  sampled.n = 2;
  add(sampled);
  GenerateRequest lp = greedy(tok.encode("The cat sat", true, false), 25);  // 6: logprobs: the host sampler
  lp.sampling.logprobs = 3;
  add(lp);
  GenerateRequest ch = greedy(tok.encode("Her name was", true, false), 20);  // 7: a grammar that completes
  ch.constraint.kind = OutputConstraint::Kind::Choice;
  ch.constraint.choices = {"Lily", "Sue and Tom", "a big red dog"};
  add(ch);
  GenerateRequest ab = greedy({1}, 200);                // 8: aborted by its client after 5 tokens
  ab.ignore_eos = true;
  add(ab, 5);

  const Outputs s = run_requests(*sync_engine, reqs, abort_at);
  const Outputs a = run_requests(*async_engine, reqs, abort_at);
  for (size_t i = 0; i < reqs.size(); ++i)
    for (size_t k = 0; k < s.requests[i].size(); ++k) {
      SCOPED_TRACE("request " + std::to_string(i) + " choice " + std::to_string(k));
      const ChoiceOut &x = s.requests[i][k], &y = a.requests[i][k];
      EXPECT_EQ(x.finished_outputs, 1);
      EXPECT_EQ(y.finished_outputs, 1);
      EXPECT_EQ(y.tokens, x.tokens);
      EXPECT_EQ(y.text, x.text);
      EXPECT_EQ(y.reason, x.reason);
      EXPECT_EQ(y.stop_reason, x.stop_reason);
      EXPECT_EQ(y.completion_tokens, x.completion_tokens);
      ASSERT_EQ(y.logprobs.size(), x.logprobs.size());
      for (size_t t = 0; t < x.logprobs.size(); ++t) {
        EXPECT_EQ(y.logprobs[t].token, x.logprobs[t].token);
        EXPECT_EQ(y.logprobs[t].logprob, x.logprobs[t].logprob);
      }
    }
  // The cases do what they are here for.
  const auto& r = s.requests;
  EXPECT_EQ(r[0][0].reason, FinishReason::Length);
  EXPECT_EQ(r[1][0].stop_reason, "little girl");
  EXPECT_EQ(r[1][0].text, r[0][0].text.substr(0, r[0][0].text.find("little girl")));
  EXPECT_EQ(r[2][0].text, r[0][0].text.substr(0, r[0][0].text.find("park") + 4));
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(r[3][k].stop_reason, "Lily");
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(r[4][k].text, "");
    EXPECT_EQ(r[4][k].reason, FinishReason::Stop);
  }
  EXPECT_NE(r[5][0].tokens, r[5][1].tokens);  // two seeded streams
  EXPECT_EQ(r[6][0].logprobs.size(), r[6][0].tokens.size());
  EXPECT_EQ(r[7][0].reason, FinishReason::Stop);
  EXPECT_TRUE(r[7][0].text == "Lily" || r[7][0].text == "Sue and Tom" || r[7][0].text == "a big red dog") << r[7][0].text;
  EXPECT_EQ(r[8][0].reason, FinishReason::Abort);
  EXPECT_EQ(r[8][0].tokens.size(), 5u);
  // Outputs were processed during the next step only with async scheduling; every block came back.
  EXPECT_EQ(s.stats.async_scheduled_steps, 0u);
  EXPECT_GT(a.stats.async_scheduled_steps, 0u);
  EXPECT_EQ(a.stats.async_scheduled_steps, a.stats.steps);  // every step's, with async scheduling
  for (const Outputs* x : {&s, &a}) {
    EXPECT_EQ(x->stats.kv.usage, 0.0);
    EXPECT_EQ(x->stats.kv.num_free_blocks, x->stats.kv.num_blocks);
    EXPECT_EQ(x->stats.num_running, 0);
  }
}

}  // namespace

TEST(AsyncScheduling, ChangesNoOutputOnTheGpuEnginePath) { expect_async_scheduling_changes_no_output("gpu-oracle"); }

TEST(AsyncScheduling, ChangesNoOutputOnTheCudaKernels) {
  TM_SKIP_EMULATOR_ENGINE_RUNS();
  expect_async_scheduling_changes_no_output("cuda-emu");
}

// On the CPU the flag has no effect: the forward runs on the host itself, so outputs are processed
// between steps as always.
TEST(AsyncScheduling, HasNoEffectOnTheCpu) {
  EngineConfig c;
  c.model_path = test::source_path("models/stories260K/stories260K.gguf");
  c.threads = 2;
  c.async_scheduling = true;
  auto e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error();
  const Outputs r = run_requests(**e, {greedy({1}, 20)}, {0});
  EXPECT_EQ(r.requests[0][0].tokens.size(), 20u);
  EXPECT_EQ(r.stats.async_scheduled_steps, 0u);
  EXPECT_GT(r.stats.steps, 0u);
}
