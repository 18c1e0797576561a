#include <gtest/gtest.h>

#include "convert/dummy.h"
#include "engine/memory_plan.h"
#include "test_support.h"

using namespace tmill;

TEST(MemoryPlan, KvCacheMemoryAcceptsBytesAndShares) {
  EXPECT_EQ(*parse_kv_cache_memory("2GiB"), 2ull << 30);
  EXPECT_EQ(*parse_kv_cache_memory("1000"), 1000u);
  const uint64_t avail = available_memory_bytes();
  ASSERT_GT(avail, 0u);
  auto p = parse_kv_cache_memory("50%");
  ASSERT_TRUE(p.ok());
  // MemAvailable moves between the two reads; allow 5%
  EXPECT_NEAR(static_cast<double>(*p), avail * 0.5, avail * 0.05);
  for (const char* bad : {"0%", "101%", "%", "abc%", "-5%", "12 parsecs"}) EXPECT_FALSE(parse_kv_cache_memory(bad).ok()) << bad;
}

TEST(MemoryPlan, SizesTheCacheAndTheContext) {
  auto m = Model::load(test::source_path("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(m.ok());
  EngineConfig cfg;
  KvLayout lay;
  // stories260K: 5 layers, 4 KV heads of 8 dims, f32 cache: 2*5*4*8*4 = 1280 bytes per token
  cfg.kv_cache_bytes = 1280 * 16 * 10;  // 10 blocks
  auto p = plan_memory(**m, cfg, 123456, &lay);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->kv_dtype, "f32");
  EXPECT_EQ(p->weight_bytes, 123456u);  // as given (Forward::weight_bytes)
  EXPECT_EQ(p->num_blocks, 10);
  EXPECT_EQ(p->kv_tokens, 160);
  EXPECT_EQ(p->max_model_len, 160);  // the trained 512 does not fit: lowered, with a note
  EXPECT_NE(p->note.find("lowered"), std::string::npos);
  EXPECT_EQ(lay.num_blocks, 11);     // + the null block
  cfg.max_model_len = 200;           // explicitly too long: refused with the numbers
  auto bad = plan_memory(**m, cfg, 123456, &lay);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("200"), std::string::npos);
  cfg.max_model_len = 0;
  cfg.kv_cache_dtype = "int8";      // 8 dims int8 + 4-byte scale per token: 2*5*4*(8+4) = 480 bytes
  auto i8 = plan_memory(**m, cfg, 123456, &lay);
  ASSERT_TRUE(i8.ok());
  EXPECT_EQ(i8->num_blocks, 1280 * 16 * 10 / (480 * 16));
  cfg.kv_cache_dtype = "q4_0";      // 8 dims as nibbles + one f16 scale per token: 2*5*4*(4+2) = 240 bytes
  auto q4 = plan_memory(**m, cfg, 123456, &lay);
  ASSERT_TRUE(q4.ok()) << q4.error();
  EXPECT_EQ(q4->num_blocks, 1280 * 16 * 10 / (240 * 16));
  cfg.block_size = 15;              // two tokens share a byte of K
  EXPECT_FALSE(plan_memory(**m, cfg, 123456, &lay).ok());
  cfg.block_size = 16;
  cfg.kv_cache_dtype = "fp4";
  EXPECT_FALSE(plan_memory(**m, cfg, 123456, &lay).ok());
  auto fp4 = plan_memory(**m, cfg, 123456, &lay);
  ASSERT_FALSE(fp4.ok());
  EXPECT_NE(fp4.error().find("unsupported --kv-cache-dtype 'fp4' (auto, f32, f16, bf16, int8, q4_0, fp8, fp8_e4m3, fp8_e5m2)"),
            std::string::npos) << fp4.error();
  // vLLM's fp8 spellings: a byte per value and a 4-byte scale per token, as int8 (fp8 is E4M3)
  for (const char* name : {"fp8", "fp8_e4m3", "fp8_e5m2"}) {
    cfg.kv_cache_dtype = name;
    auto fp8 = plan_memory(**m, cfg, 123456, &lay);
    ASSERT_TRUE(fp8.ok()) << name << ": " << fp8.error();
    EXPECT_EQ(fp8->num_blocks, i8->num_blocks) << name;
    EXPECT_EQ(fp8->kv_dtype, name);
    EXPECT_EQ(lay.dtype, std::string(name) == "fp8_e5m2" ? DType::F8_E5M2 : DType::F8_E4M3) << name;
  }
}

// Learned positions bound the context: the plan refuses --max-model-len past them, speculative tokens
// included, and caps the default there.
TEST(MemoryPlan, LearnedPositionsBoundTheContext) {
  DummyOptions o;
  o.shape = *find_shape("tiny-gpt2");  // GPT-2's form: 256 learned positions
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/plan-gpt2.gguf";
  ASSERT_TRUE(write_dummy_model(o, path).ok());
  auto loaded = Model::load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  const std::shared_ptr<Model> m = *loaded;
  EngineConfig cfg;
  cfg.kv_cache_bytes = 64ull << 20;
  KvLayout lay;
  auto p = plan_memory(*m, cfg, 1000, &lay);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->max_model_len, 256);
  cfg.max_model_len = 257;
  auto past = plan_memory(*m, cfg, 1000, &lay);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.error().find("256 positions"), std::string::npos) << past.error();
  cfg.max_model_len = 256;
  EXPECT_TRUE(plan_memory(*m, cfg, 1000, &lay).ok());
  cfg.speculative.method = "ngram";
  cfg.speculative.num_speculative_tokens = 4;
  auto spec = plan_memory(*m, cfg, 1000, &lay);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().find("252 with 4 speculative tokens"), std::string::npos) << spec.error();
  cfg.max_model_len = 0;
  auto capped = plan_memory(*m, cfg, 1000, &lay);
  ASSERT_TRUE(capped.ok()) << capped.error();
  EXPECT_EQ(capped->max_model_len, 252);
}
