// The engine's front door: every limit check_request enforces names its field, and a request that
// passes it is what the scheduler accepts (the scheduler asserts the same conditions).
#include <gtest/gtest.h>

#include "engine/batch.h"
#include "engine/engine.h"

using namespace tmill;

namespace {

constexpr RequestLimits kLimits{100, 64, false};

GenerateRequest valid() {
  GenerateRequest r;
  r.prompt = {1, 2, 3};
  r.max_tokens = 10;
  return r;
}

std::string field_of(const GenerateRequest& r, const RequestLimits& limits = kLimits) {
  auto p = check_request(r, limits);
  return p ? p->field : "";
}

}  // namespace

TEST(RequestCheck, AcceptsAValidRequestAndExactlyFullContext) {
  EXPECT_FALSE(check_request(valid(), kLimits).has_value());
  GenerateRequest r = valid();
  r.max_tokens = 61;  // 3 + 61 = 64
  EXPECT_FALSE(check_request(r, kLimits).has_value());
}

TEST(RequestCheck, EachLimitNamesItsField) {
  struct Case {
    const char* field;
    void (*edit)(GenerateRequest&);
  };
  const Case cases[] = {
      {"prompt", [](GenerateRequest& r) { r.prompt.clear(); }},
      {"prompt", [](GenerateRequest& r) { r.prompt[1] = 100; }},
      {"prompt", [](GenerateRequest& r) { r.prompt[0] = -1; }},
      {"n", [](GenerateRequest& r) { r.n = 0; }},
      {"max_tokens", [](GenerateRequest& r) { r.max_tokens = 0; }},
      {"min_tokens", [](GenerateRequest& r) { r.min_tokens = -1; }},
      {"min_tokens", [](GenerateRequest& r) { r.min_tokens = 11; }},
      {"stop", [](GenerateRequest& r) { r.stop = {"ok", ""}; }},
      {"stop_token_ids", [](GenerateRequest& r) { r.stop_token_ids = {5, 100}; }},
      {"temperature", [](GenerateRequest& r) { r.sampling.temperature = -0.5f; }},
      {"top_p", [](GenerateRequest& r) { r.sampling.top_p = 0; }},
      {"top_p", [](GenerateRequest& r) { r.sampling.top_p = 1.5f; }},
      {"min_p", [](GenerateRequest& r) { r.sampling.min_p = 2; }},
      {"repetition_penalty", [](GenerateRequest& r) { r.sampling.repetition_penalty = 0; }},
      {"presence_penalty", [](GenerateRequest& r) { r.sampling.presence_penalty = 3; }},
      {"frequency_penalty", [](GenerateRequest& r) { r.sampling.frequency_penalty = -2.5f; }},
      {"logit_bias", [](GenerateRequest& r) { r.sampling.logit_bias = {{100, 1.0f}}; }},
      {"logit_bias", [](GenerateRequest& r) { r.sampling.logit_bias = {{5, 101.0f}}; }},
      {"priority", [](GenerateRequest& r) { r.priority = 2; }},
      {"max_tokens", [](GenerateRequest& r) { r.max_tokens = 62; }},
  };
  for (const Case& c : cases) {
    GenerateRequest r = valid();
    c.edit(r);
    auto p = check_request(r, kLimits);
    ASSERT_TRUE(p.has_value()) << c.field;
    EXPECT_EQ(p->field, c.field);
    EXPECT_FALSE(p->message.empty());
  }
  GenerateRequest r = valid();
  r.priority = 2;
  EXPECT_EQ(field_of(r, {100, 64, /*priority_scheduling=*/true}), "");
}

TEST(RequestCheck, ContextLengthProblemsNameBothNumbers) {
  GenerateRequest r = valid();
  r.prompt.assign(64, 7);
  auto p = check_request(r, kLimits);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, RequestProblem::Kind::ContextLength);
  EXPECT_EQ(p->field, "prompt");
  EXPECT_NE(p->message.find("maximum context length is 64 tokens"), std::string::npos) << p->message;
  EXPECT_NE(p->message.find("64 input tokens"), std::string::npos) << p->message;
  r.prompt.assign(40, 7);
  r.max_tokens = 30;
  p = check_request(r, kLimits);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, RequestProblem::Kind::ContextLength);
  EXPECT_EQ(p->field, "max_tokens");
  EXPECT_NE(p->message.find("you requested 70 tokens (40 in the prompt, 30 in the completion)"), std::string::npos)
      << p->message;
  // A too-long prompt is reported as such even when max_tokens is also unusable.
  r.prompt.assign(70, 7);
  r.max_tokens = 0;
  EXPECT_EQ(check_request(r, kLimits)->kind, RequestProblem::Kind::ContextLength);
}

TEST(BatchBuilder, OneSlicePerScheduledRequestInOrder) {
  SchedulerOutput out;
  ScheduledRequest a;
  a.id = 7;
  a.start_pos = 0;
  a.num_tokens = 3;
  a.token_ids = {10, 11, 12};
  a.block_table = {1, 2};
  a.produces_sample = false;  // a prefill chunk that does not reach the end of the prompt
  ScheduledRequest b;
  b.id = 3;
  b.start_pos = 9;
  b.num_tokens = 1;
  b.token_ids = {42};
  b.block_table = {4};
  b.produces_sample = true;
  out.scheduled = {a, b};
  out.total_tokens = 4;
  const ForwardBatch batch = build_forward_batch(out);
  EXPECT_EQ(batch.tokens, (std::vector<int32_t>{10, 11, 12, 42}));
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.seqs[0].token_begin, 0);
  EXPECT_EQ(batch.seqs[0].n_tokens, 3);
  EXPECT_EQ(batch.seqs[0].pos_begin, 0);
  EXPECT_EQ(batch.seqs[0].block_table, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(batch.seqs[0].logits, SeqSlice::Logits::None);
  EXPECT_EQ(batch.seqs[1].token_begin, 3);
  EXPECT_EQ(batch.seqs[1].pos_begin, 9);
  EXPECT_EQ(batch.seqs[1].logits, SeqSlice::Logits::Last);
  EXPECT_EQ(batch.n_logit_rows(), 1);
}
