// vLLM's --generation-config (server/generation_config.h): where the sampling defaults come from, and
// that a request's own fields win over them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/generation_config.h"
#include "server/openai_request.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

std::string dir_with(const std::string& name, const std::string& json_text) {
  const std::string d = test::temp_dir() + "/" + name;
  std::filesystem::create_directories(d);
  if (!json_text.empty()) std::ofstream(d + "/generation_config.json") << json_text;
  return d;
}

ServerContext context(const GenerationDefaults& d) {
  static std::shared_ptr<const Tokenizer> tok = [] {
    auto t = Tokenizer::load(test::source_path("models/stories260K/stories260K.gguf"));
    EXPECT_TRUE(t.ok());
    return std::shared_ptr<const Tokenizer>(*t);
  }();
  ServerContext c;
  c.served_model_name = "m";
  c.tokenizer = tok;
  c.max_model_len = 64;
  c.n_vocab = tok->n_vocab();
  c.defaults = d;
  return c;
}

}  // namespace

TEST(GenerationConfig, WhereTheDefaultsComeFrom) {
  ModelInfo info;
  info.generation_defaults.temperature = 0.6f;  // as if the GGUF had general.sampling.temp
  info.generation_defaults.top_k = 20;
  // auto: the file's keys
  auto a = load_generation_defaults("auto", dir_with("none", "") + "/m.gguf", info);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a->temperature, 0.6f);
  EXPECT_EQ(a->top_k, 20);
  EXPECT_FALSE(a->top_p);
  // auto with a generation_config.json beside the model: it overlays them (vLLM's keys only)
  const std::string beside = dir_with("beside", R"({"temperature": 0.7, "top_p": 0.8, "max_new_tokens": 12,
                                                    "do_sample": true, "eos_token_id": [1, 2]})");
  auto b = load_generation_defaults("auto", beside + "/m.gguf", info);
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_EQ(b->temperature, 0.7f);
  EXPECT_EQ(b->top_p, 0.8f);
  EXPECT_EQ(b->top_k, 20);
  EXPECT_EQ(b->max_tokens, 12);
  EXPECT_EQ(describe(*b), "temperature 0.7, top_p 0.8, top_k 20, max_tokens 12");
  // vllm: none at all
  auto v = load_generation_defaults("vllm", beside + "/m.gguf", info);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->empty());
  // a folder: its file only (not the model's keys)
  auto f = load_generation_defaults(dir_with("folder", R"({"repetition_penalty": 1.1, "min_p": 0.05})"), "", info);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->repetition_penalty, 1.1f);
  EXPECT_EQ(f->min_p, 0.05f);
  EXPECT_FALSE(f->temperature);
  // errors
  auto missing = load_generation_defaults(dir_with("empty", ""), "", info);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("no generation_config.json"), std::string::npos) << missing.error();
  auto bad = load_generation_defaults(dir_with("bad", R"({"temperature": "hot"})"), "", info);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("'temperature' must be a number"), std::string::npos) << bad.error();
  auto broken = load_generation_defaults("auto", dir_with("broken", "{") + "/m.gguf", info);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().find("not a JSON object"), std::string::npos) << broken.error();
}

TEST(GenerationConfig, RequestFieldsWinOverTheDefaults) {
  GenerationDefaults d;
  d.temperature = 0.6f;
  d.top_p = 0.9f;
  d.top_k = 20;
  d.min_p = 0.05f;
  d.repetition_penalty = 1.1f;
  d.max_tokens = 7;
  const ServerContext c = context(d);
  auto omitted = map_completion_request(json::parse(R"({"model":"m","prompt":"Once upon"})"), c);
  ASSERT_TRUE(omitted.ok()) << omitted.error();
  const GenerateRequest& r = omitted->prompts[0].request;
  EXPECT_EQ(r.sampling.temperature, 0.6f);
  EXPECT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.max_tokens, 7);
  auto given = map_completion_request(json::parse(R"({"model":"m","prompt":"Once upon","temperature":0,"top_p":1,
      "top_k":-1,"min_p":0,"repetition_penalty":1,"max_tokens":3})"), c);
  ASSERT_TRUE(given.ok()) << given.error();
  const GenerateRequest& g = given->prompts[0].request;
  EXPECT_EQ(g.sampling.temperature, 0.0f);
  EXPECT_EQ(g.sampling.top_p, 1.0f);
  EXPECT_EQ(g.sampling.top_k, 0);
  EXPECT_EQ(g.sampling.min_p, 0.0f);
  EXPECT_EQ(g.sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(g.max_tokens, 3);
  // without defaults: OpenAI's (temperature 1, completions 16 tokens)
  auto plain = map_completion_request(json::parse(R"({"model":"m","prompt":"Once upon"})"), context({}));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->prompts[0].request.sampling.temperature, 1.0f);
  EXPECT_EQ(plain->prompts[0].request.max_tokens, 16);
}
