// The CUDA backend's memory plan (gpu/memory_plan.h): vLLM's --gpu-memory-utilization arithmetic and
// its errors, on the CPU (no device needed).
#include <gtest/gtest.h>

#include "gpu/memory_plan.h"

namespace tmill::gpu {
namespace {

constexpr uint64_t GiB = uint64_t{1} << 30, MiB = uint64_t{1} << 20;

// An H200-like device and a Llama-3-8B-like model in BF16: 128 KiB of KV per token (32 layers x 8 KV
// heads x 128 x 2 x 2 bytes), so 2 MiB per 16-token block.
GpuMemoryInputs h200_llama8b() {
  GpuMemoryInputs in;
  in.total_bytes = 141 * GiB;
  in.free_bytes = 140 * GiB;
  in.utilization = 0.9;
  in.weight_bytes = 15 * GiB;
  in.activation_bytes = 2 * GiB;
  in.kv_block_bytes = 2 * MiB;
  in.block_size = 16;
  in.trained_ctx = 8192;
  return in;
}

TEST(GpuMemoryPlan, KvCacheGetsTheBudgetLessWeightsAndActivationsInWholeBlocks) {
  const auto p = plan_gpu_memory(h200_llama8b());
  ASSERT_TRUE(p.ok()) << p.error();
  const uint64_t budget = static_cast<uint64_t>(0.9 * static_cast<double>(141 * GiB));
  EXPECT_EQ(p->budget_bytes, budget);
  EXPECT_EQ(p->kv_blocks, static_cast<int64_t>((budget - 17 * GiB) / (2 * MiB)));
  EXPECT_EQ(p->kv_tokens, p->kv_blocks * 16);
  EXPECT_EQ(p->kv_bytes, static_cast<uint64_t>(p->kv_blocks) * 2 * MiB);
  EXPECT_LE(p->kv_bytes + 17 * GiB, budget);
  EXPECT_GT(p->kv_bytes + 17 * GiB + 2 * MiB, budget);  // no whole block left over
  EXPECT_EQ(p->max_model_len, 8192);
  EXPECT_FALSE(p->lowered);
  EXPECT_NE(p->summary.find("max_model_len 8192"), std::string::npos) << p->summary;
}

TEST(GpuMemoryPlan, TrainedContextIsLoweredToWhatFitsButAnExplicitOneIsNot) {
  GpuMemoryInputs in = h200_llama8b();
  in.trained_ctx = 10'000'000;
  auto p = plan_gpu_memory(in);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->lowered);
  EXPECT_EQ(p->max_model_len, p->kv_tokens);
  EXPECT_NE(p->summary.find("lowered"), std::string::npos);
  in.max_model_len = p->kv_tokens + 1;
  auto q = plan_gpu_memory(in);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().find("largest context that fits"), std::string::npos) << q.error();
  EXPECT_NE(q.error().find("--max-model-len " + std::to_string(p->kv_tokens)), std::string::npos) << q.error();
  in.max_model_len = p->kv_tokens;
  EXPECT_TRUE(plan_gpu_memory(in).ok());
}

TEST(GpuMemoryPlan, WeightsThatDoNotFitAreAClearError) {
  GpuMemoryInputs in = h200_llama8b();
  in.weight_bytes = 130 * GiB;  // a 70B model in BF16 on one GPU
  const auto p = plan_gpu_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("out of GPU memory"), std::string::npos) << p.error();
  EXPECT_NE(p.error().find("--gpu-memory-utilization"), std::string::npos) << p.error();
}

TEST(GpuMemoryPlan, LessThanOneBlockLeftIsAnError) {
  GpuMemoryInputs in = h200_llama8b();
  const uint64_t budget = static_cast<uint64_t>(0.9 * static_cast<double>(141 * GiB));
  in.weight_bytes = budget - in.activation_bytes - MiB;  // 1 MiB left, a block is 2
  const auto p = plan_gpu_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("less than one block"), std::string::npos) << p.error();
}

TEST(GpuMemoryPlan, UtilizationIsCheckedAndCannotTakeWhatOthersHold) {
  GpuMemoryInputs in = h200_llama8b();
  for (double u : {0.0, -0.5, 1.01}) {
    in.utilization = u;
    EXPECT_FALSE(plan_gpu_memory(in).ok()) << u;
  }
  in.utilization = 0.9;
  in.free_bytes = 100 * GiB;  // another process holds 41 GiB: 0.9 x 141 does not fit
  const auto p = plan_gpu_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("held by other processes"), std::string::npos) << p.error();
  EXPECT_NE(p.error().find("0.70"), std::string::npos) << p.error();  // 100 / 141
  in.utilization = 0.7;
  EXPECT_TRUE(plan_gpu_memory(in).ok());
}

// --kv-cache-memory (vLLM's kv_cache_memory_bytes) instead of the utilization: exactly that KV cache,
// checked against the memory that is free.
TEST(GpuMemoryPlan, AnExplicitKvCacheSizeWinsAndMustFitTheFreeMemory) {
  auto in = h200_llama8b();
  in.kv_bytes = 10 * GiB + MiB;  // not a whole number of 2 MiB blocks
  auto p = plan_gpu_memory(in);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->kv_blocks, static_cast<int64_t>(5 * 1024));
  EXPECT_EQ(p->kv_bytes, 10 * GiB);
  EXPECT_EQ(p->budget_bytes, 15 * GiB + 2 * GiB + 10 * GiB + MiB);
  EXPECT_NE(p->summary.find("--kv-cache-memory"), std::string::npos) << p->summary;
  in.kv_bytes = 124 * GiB;  // 15 + 2 + 124 > 140 free
  p = plan_gpu_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("lower --kv-cache-memory to at most 123.00 GiB"), std::string::npos) << p.error();
}

}  // namespace
}  // namespace tmill::gpu
