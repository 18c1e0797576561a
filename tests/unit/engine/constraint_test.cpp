// Structured output through the engine on stories260K (a 512-token SentencePiece vocabulary with
// byte fallback): outputs follow the constraint (choices, GBNF, JSON), n > 1 forks keep their own
// matcher, `after` starts the constraint mid-output, end-of-text only when the grammar is complete,
// max_tokens cuts with "length", logprobs stay the model's, compile errors are refused at the door.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;

namespace {

std::unique_ptr<Engine> stories() {
  EngineConfig c;
  c.model_path = test::source_path("models/stories260K/stories260K.gguf");
  c.threads = 2;
  c.max_num_seqs = 32;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  return std::move(e).value();
}

struct Out {
  std::vector<std::string> text = std::vector<std::string>(8);
  std::vector<std::vector<int32_t>> tokens = std::vector<std::vector<int32_t>>(8);
  std::vector<FinishReason> reason = std::vector<FinishReason>(8, FinishReason::None);
  std::vector<SampleResult> logprobs;  // choice 0
};

std::vector<Out> run_all(Engine& e, const std::vector<GenerateRequest>& reqs) {
  std::vector<Out> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    Out* o = &out[i];
    auto id = e.submit(reqs[i], [o](const RequestOutput& r) {
      o->text[r.index] += r.text;
      o->tokens[r.index].insert(o->tokens[r.index].end(), r.token_ids.begin(), r.token_ids.end());
      if (r.index == 0) o->logprobs.insert(o->logprobs.end(), r.logprobs.begin(), r.logprobs.end());
      if (r.finished) o->reason[r.index] = r.finish_reason;
    });
    EXPECT_TRUE(id.ok()) << id.error();
  }
  e.run_until_idle();
  return out;
}

GenerateRequest request(Engine& e, const std::string& prompt, int32_t max_tokens) {
  GenerateRequest r;
  r.prompt = e.tokenizer()->encode(prompt, true, false);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

OutputConstraint choice(std::vector<std::string> choices) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::Choice;
  c.choices = std::move(choices);
  return c;
}

const std::vector<std::string> kChoices = {"Paris", "London", "a big red dog", "yes"};

bool is_choice(const std::string& s) { return std::find(kChoices.begin(), kChoices.end(), s) != kChoices.end(); }

}  // namespace

TEST(EngineConstraint, GreedyChoiceIsOneOfTheChoices) {
  auto e = stories();
  GenerateRequest free = request(*e, "Once upon a time", 40);
  GenerateRequest r = free;
  r.constraint = choice(kChoices);
  auto out = run_all(*e, {free, r});
  EXPECT_FALSE(is_choice(out[0].text[0])) << "the test needs a model that does not say a choice by itself";
  EXPECT_TRUE(is_choice(out[1].text[0])) << out[1].text[0];
  EXPECT_EQ(out[1].reason[0], FinishReason::Stop);
  EXPECT_EQ(e->stats().structured_requests_total, 1u);
}

TEST(EngineConstraint, SampledChoicesInABatchAndForks) {
  auto e = stories();
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest r = request(*e, i % 2 ? "Once upon a time" : "The dog", 30);
    r.sampling.temperature = 1.5f;
    r.sampling.seed = 100 + i;
    r.n = 4;  // the forks copy choice 0's matcher before its first token
    if (i != 3) r.constraint = choice(kChoices);  // one free request in the batch
    reqs.push_back(r);
  }
  auto out = run_all(*e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (i == 3) continue;
    for (int k = 0; k < 4; ++k) {
      EXPECT_TRUE(is_choice(out[i].text[k])) << "request " << i << " choice " << k << ": " << out[i].text[k];
      EXPECT_EQ(out[i].reason[k], FinishReason::Stop);
    }
  }
}

TEST(EngineConstraint, EndOfTextOnlyWhenTheGrammarIsComplete) {
  auto e = stories();
  GenerateRequest r = request(*e, "Once upon a time", 40);
  const int32_t eos = e->tokenizer()->eos_id();
  r.sampling.logit_bias.push_back({eos, 100.0f});  // the model wants to stop at once
  GenerateRequest free = r;
  r.constraint = choice({"a big red dog", "a big red dog and a cat"});
  auto out = run_all(*e, {free, r});
  EXPECT_EQ(out[0].text[0], "");  // unconstrained: stops at once
  EXPECT_EQ(out[1].text[0], "a big red dog");  // first accepting point: EOS allowed there
  EXPECT_EQ(out[1].reason[0], FinishReason::Stop);
}

TEST(EngineConstraint, MaxTokensCutIsLength) {
  auto e = stories();
  GenerateRequest r = request(*e, "Once upon a time", 3);
  r.constraint = choice({"a very long answer that cannot fit in three tokens of this vocabulary"});
  auto out = run_all(*e, {r});
  EXPECT_EQ(out[0].tokens[0].size(), 3u);
  EXPECT_EQ(out[0].reason[0], FinishReason::Length);
}

TEST(EngineConstraint, LogprobsAreTheModelsAndFreeOutputIsUnchanged) {
  auto e = stories();
  GenerateRequest free = request(*e, "Once upon a time", 12);
  free.sampling.logprobs = 2;
  GenerateRequest r = free;
  r.constraint = choice({"London"});
  auto out = run_all(*e, {free, r, free});
  EXPECT_EQ(out[0].tokens[0], out[2].tokens[0]);  // a constrained neighbour changes nothing
  EXPECT_EQ(out[0].text[0], out[2].text[0]);
  ASSERT_FALSE(out[1].logprobs.empty());
  const SampleResult& first = out[1].logprobs[0];
  EXPECT_TRUE(std::isfinite(first.logprob));
  ASSERT_EQ(first.top.size(), 2u);
  EXPECT_EQ(first.top[0].token, out[0].tokens[0][0]);  // the unmasked row's favourite
  EXPECT_EQ(out[1].text[0], "London");
}

TEST(EngineConstraint, AfterStartsTheConstraintMidOutput) {
  auto e = stories();
  GenerateRequest free = request(*e, "Once upon a time", 40);
  const Out f = run_all(*e, {free})[0];
  ASSERT_GE(f.tokens[0].size(), 6u);
  // `after` ends at a token boundary: the free text up to it, then a choice.
  const std::string head = e->tokenizer()->decode_continuation(std::span(f.tokens[0]).first(4));
  ASSERT_EQ(f.text[0].compare(0, head.size(), head), 0);
  GenerateRequest r = free;
  r.constraint = choice(kChoices);
  r.constraint.after = head;
  std::string got = run_all(*e, {r})[0].text[0];
  ASSERT_EQ(got.compare(0, head.size(), head), 0) << "free: " << f.text[0] << "\ngot: " << got;
  EXPECT_TRUE(is_choice(got.substr(head.size()))) << got;
  // `after` ends inside the 5th token: the bytes of that token past `after` feed the matcher, so
  // the output goes on with a choice that starts with them.
  const std::string fifth = e->tokenizer()->token_bytes(f.tokens[0][4]);
  ASSERT_GE(fifth.size(), 2u) << "pick a longer token";
  r.constraint.after = head + fifth.substr(0, 1);
  const std::string rest = fifth.substr(1);
  r.constraint.choices = {rest + " and a dog", "zzz"};
  got = run_all(*e, {r})[0].text[0];
  EXPECT_EQ(got, head + fifth + " and a dog");
}

TEST(EngineConstraint, GbnfGrammar) {
  auto e = stories();
  GenerateRequest r = request(*e, "Once upon a time", 40);
  r.constraint.kind = OutputConstraint::Kind::Grammar;
  r.constraint.text = "root ::= [a-z]+ \" \" [0-9] [0-9]\n";
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 7;
  r.n = 3;
  auto out = run_all(*e, {r});
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(std::regex_match(out[0].text[k], std::regex("[a-z]+ [0-9][0-9]"))) << out[0].text[k];
    EXPECT_EQ(out[0].reason[k], FinishReason::Stop);
  }
}

TEST(EngineConstraint, JsonSchemaOutputParsesAndValidates) {
  auto e = stories();
  GenerateRequest r = request(*e, "Once upon a time", 120);
  r.constraint.kind = OutputConstraint::Kind::JsonSchema;
  r.constraint.text = R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
    "age":{"type":"integer","minimum":0,"maximum":120},"pet":{"enum":["cat","dog"]}},
    "required":["name","age","pet"],"additionalProperties":false})";
  auto out = run_all(*e, {r});
  ASSERT_EQ(out[0].reason[0], FinishReason::Stop) << out[0].text[0];
  auto j = nlohmann::json::parse(out[0].text[0]);
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j["name"].is_string());
  EXPECT_LE(j["name"].get<std::string>().size(), 12u);
  EXPECT_TRUE(j["age"].is_number_integer());
  EXPECT_TRUE(j["pet"] == "cat" || j["pet"] == "dog");
  EXPECT_EQ(j.size(), 3u);
}

TEST(EngineConstraint, CompileErrorsAreRefusedNamingTheField) {
  auto e = stories();
  GenerateRequest r = request(*e, "Once upon a time", 10);
  r.constraint.kind = OutputConstraint::Kind::Grammar;
  r.constraint.text = "root ::= (\"unclosed\"";
  r.constraint.field = "guided_grammar";
  auto problem = e->check(r);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->kind, RequestProblem::Kind::Invalid);
  EXPECT_EQ(problem->field, "guided_grammar");
  EXPECT_FALSE(problem->message.empty());
  EXPECT_FALSE(e->submit(r, nullptr).ok());
  EXPECT_EQ(e->stats().grammar_compile_failures_total, 2u);  // check and submit each refused it
  EXPECT_EQ(e->stats().structured_requests_total, 0u);
}
