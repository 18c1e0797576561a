// The engine of an embedding model (engine/embed.cpp): Engine::create recognizes encoders and decoders
// with a pooling type, embeds inputs of concurrent callers batched together (each caller gets what it
// would get alone), refuses generation, and checks inputs naming the one at fault.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "convert/dummy.h"
#include "engine/engine.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;

namespace {

Result<std::unique_ptr<Engine>> try_engine(const std::string& shape, const std::string& pooling, int32_t batch_tokens,
                                           const std::string& device, int32_t max_model_len = 0) {
  DummyOptions o;
  o.shape = *find_shape(shape);
  o.dtype = DType::F32;
  o.seed = 5;
  o.pooling = pooling;
  const std::string path = test::temp_dir() + "/embed-engine-" + shape + "-" + pooling + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  EngineConfig c;
  c.model_path = path;
  c.threads = 2;
  c.max_num_batched_tokens = batch_tokens;
  c.device = device;
  c.max_model_len = max_model_len;
  if (device != "cpu") c.gpu_memory_utilization = 0.25;
  return Engine::create(c);
}

std::unique_ptr<Engine> engine_for(const std::string& shape, const std::string& pooling, int32_t batch_tokens = 2048,
                                   const std::string& device = "cpu", int32_t max_model_len = 0) {
  auto e = try_engine(shape, pooling, batch_tokens, device, max_model_len);
  EXPECT_TRUE(e.ok()) << e.error();
  return e.ok() ? std::move(e).value() : nullptr;
}

}  // namespace

TEST(EmbedEngine, EncoderEmbedsAndDoesNotGenerate) {
  auto e = engine_for("tiny-bert", "mean");
  ASSERT_TRUE(e);
  const ModelInfo& info = e->model_info();
  EXPECT_TRUE(info.is_embedding());
  EXPECT_EQ(info.pooling, "mean");
  EXPECT_EQ(info.embedding_dim, 64);
  EXPECT_EQ(info.architecture, "bert");
  EXPECT_GT(info.n_params, 64 * 64);  // (the start-up log's "params, weights F32")
  EXPECT_EQ(info.weight_type, "F32");
  EXPECT_EQ(e->max_model_len(), 128);
  auto ids = e->tokenizer()->encode("hello world", true, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 2);  // [CLS]
  EXPECT_EQ(ids.back(), 3);   // [SEP]
  auto out = e->embed({ids, {2, 50, 3}});
  ASSERT_TRUE(out.ok()) << out.error();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].size(), 64u);
  EXPECT_NE((*out)[0], (*out)[1]);
  // generation is refused, naming the model field
  GenerateRequest r;
  r.prompt = ids;
  r.max_tokens = 4;
  auto problem = e->check(r);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "model");
  EXPECT_NE(problem->message.find("embedding model"), std::string::npos) << problem->message;
  EXPECT_FALSE(e->submit(r, [](const RequestOutput&) {}).ok());
  e->start();  // harmless: an embedding engine has no step loop
  EXPECT_FALSE(e->step());
  EXPECT_FALSE(e->load_lora("x", "/nonexistent.gguf").ok());
}

// EmbeddingGemma: an embedding model without being asked (no --pooling), dense_3's width out, no
// generation, and the GPU backends refuse its bidirectional attention by name.
TEST(EmbedEngine, GemmaEmbeddingEmbedsOnTheCpuOnly) {
  auto e = engine_for("tiny-gemma-embedding", "");
  ASSERT_TRUE(e);
  const ModelInfo& info = e->model_info();
  EXPECT_TRUE(info.is_embedding());
  EXPECT_EQ(info.pooling, "mean");
  EXPECT_EQ(info.architecture, "gemma-embedding");
  EXPECT_EQ(info.embedding_dim, 64);
  auto out = e->embed({{2, 40, 7, 300}, {2, 40, 7, 301}});
  ASSERT_TRUE(out.ok()) << out.error();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].size(), 64u);
  EXPECT_NE((*out)[0], (*out)[1]);
  GenerateRequest r;
  r.prompt = {2, 40, 7};
  r.max_tokens = 4;
  auto problem = e->check(r);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->message.find("embedding model"), std::string::npos) << problem->message;
  auto gpu = try_engine("tiny-gemma-embedding", "", 200, "gpu-oracle");
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.error().find("bidirectional attention"), std::string::npos) << gpu.error();
}

TEST(EmbedEngine, InputErrorsNameTheInput) {
  auto e = engine_for("tiny-bert", "cls");
  ASSERT_TRUE(e);
  auto empty = e->embed({{2, 3}, {}});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().find("input[1] is empty"), std::string::npos) << empty.error();
  auto oov = e->embed({{2, 100000, 3}});
  ASSERT_FALSE(oov.ok());
  EXPECT_NE(oov.error().find("input[0]"), std::string::npos) << oov.error();
  auto too_long = e->embed({std::vector<int32_t>(200, 7)});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().find("maximum context length"), std::string::npos) << too_long.error();
  auto none = e->embed({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Many callers at once, with a token budget that forces several forwards: every caller gets exactly
// what its inputs give alone.
TEST(EmbedEngine, ConcurrentCallersGetTheirOwnResults) {
  for (const auto& [shape, pooling] : {std::pair{"tiny-bert", "cls"}, std::pair{"tiny-qwen3", "last"}}) {
    auto e = engine_for(shape, pooling, /*batch_tokens=*/40);
    ASSERT_TRUE(e);
    std::vector<std::vector<std::vector<int32_t>>> jobs;
    for (int j = 0; j < 8; ++j) {
      std::vector<std::vector<int32_t>> in;
      for (int k = 0; k <= j % 3; ++k) {
        std::vector<int32_t> seq = {2};
        for (int t = 0; t < 5 + 3 * j + k; ++t) seq.push_back(10 + (t * 7 + j * 13 + k) % 180);
        seq.push_back(3);
        in.push_back(seq);
      }
      jobs.push_back(in);
    }
    std::vector<std::vector<std::vector<float>>> alone(jobs.size()), together(jobs.size());
    for (size_t j = 0; j < jobs.size(); ++j) {
      auto r = e->embed(jobs[j]);
      ASSERT_TRUE(r.ok()) << r.error();
      alone[j] = *r;
    }
    std::vector<std::thread> threads;
    for (size_t j = 0; j < jobs.size(); ++j)
      threads.emplace_back([&, j] {
        auto r = e->embed(jobs[j]);
        if (r.ok()) together[j] = *r;
      });
    for (auto& t : threads) t.join();
    for (size_t j = 0; j < jobs.size(); ++j) {
      ASSERT_EQ(together[j].size(), alone[j].size()) << shape << " job " << j;
      for (size_t k = 0; k < alone[j].size(); ++k)
        for (size_t i = 0; i < alone[j][k].size(); ++i)
          EXPECT_NEAR(together[j][k][i], alone[j][k][i], 2e-3) << shape << " job " << j << " input " << k;
    }
  }
}

// Decoder embedders on the GPU engine path (gpu-oracle; cuda-emu: the CUDA kernels on the emulator):
// last-token, mean and reranker (rank) pooling give the CPU engine's outputs; a token budget of 200
// with max_model_len 32 gives a KV scratch of 76 blocks, so 100 two-token inputs in one call run in
// two forwards, and 30-token inputs three or four to a forward. Encoders are refused there, saying so.
void expect_gpu_embeddings(const std::string& device) {
  for (const auto& [shape, pooling] :
       {std::pair{"tiny-qwen3", "last"}, std::pair{"tiny-llama", "mean"}, std::pair{"tiny-qwen3-reranker", "rank"}}) {
    SCOPED_TRACE(std::string(shape) + " " + pooling);
    auto cpu = engine_for(shape, pooling, 200, "cpu", 32);
    auto gpu = engine_for(shape, pooling, 200, device, 32);
    ASSERT_TRUE(cpu && gpu);
    EXPECT_NE(gpu->memory_plan().note.find("embedding model on "), std::string::npos) << gpu->memory_plan().note;
    for (const int len : {2, 30}) {
      std::vector<std::vector<int32_t>> in;
      for (int k = 0; k < (len == 2 ? 100 : 9); ++k) {
        std::vector<int32_t> seq;
        for (int t = 0; t < len; ++t) seq.push_back(10 + (t * 7 + k * 13) % 180);
        in.push_back(seq);
      }
      auto want = cpu->embed(in), got = gpu->embed(in);
      ASSERT_TRUE(want.ok()) << want.error();
      ASSERT_TRUE(got.ok()) << got.error();
      ASSERT_EQ(got->size(), want->size());
      for (size_t k = 0; k < want->size(); ++k) {
        ASSERT_EQ((*got)[k].size(), (*want)[k].size());
        for (size_t i = 0; i < (*want)[k].size(); ++i)
          ASSERT_NEAR((*got)[k][i], (*want)[k][i], 2e-3 * (1.0 + std::fabs((*want)[k][i]))) << "len " << len << " input " << k;
      }
    }
  }
  auto bert = try_engine("tiny-bert", "mean", 200, device);
  ASSERT_FALSE(bert.ok());
  EXPECT_NE(bert.error().find("encoders run on the CPU only"), std::string::npos) << bert.error();
}
TEST(EmbedEngine, GpuOracleEmbedsAsTheCpu) { expect_gpu_embeddings("gpu-oracle"); }
TEST(EmbedEngine, CudaEmuEmbedsAsTheCpu) {
  TM_SKIP_EMULATOR_ENGINE_RUNS();
  expect_gpu_embeddings("cuda-emu");
}

TEST(EmbedEngine, GenerationModelRefusesEmbed) {
  DummyOptions o;
  o.shape = *find_shape("tiny-qwen3");
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/embed-engine-gen.gguf";
  ASSERT_TRUE(write_dummy_model(o, path).ok());
  EngineConfig c;
  c.model_path = path;
  c.threads = 1;
  auto e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_FALSE((*e)->model_info().is_embedding());
  auto r = (*e)->embed({{1, 2, 3}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("not an embedding model"), std::string::npos) << r.error();
}
