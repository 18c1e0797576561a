// The GPU forward pass (model/gpu_forward.h) against the CPU's reference forward: with the host
// backend (model/gpu_host_ops.h) and with the CUDA kernels on the CPU's emulator of CUDA
// (gpu::cuda_emu_ops()) on every machine, and with CUDA where a device is visible (else those cases
// skip, saying why). Mixed batches (a prompt chunk beside decode tokens), block tables
// out of order, copy-on-write of a block, the rows that get logits, greedy decoding of the real
// stories260K model, and clear refusals of what it does not run yet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "convert/dummy.h"
#include "convert/lora.h"
#include "convert/model_quantizer.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "model/forward.h"
#include "model/gpu_forward.h"
#include "model/gpu_host_ops.h"
#include "model/kv_storage.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/reference.h"
#include "test_support.h"

namespace tmill {
namespace {

int32_t argmax(const float* x, int64_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

std::shared_ptr<Model> dummy(const std::string& shape, DType dtype, int64_t width = 0) {
  DummyOptions o;
  o.shape = *find_shape(shape);
  if (width > 0) {  // rows a multiple of the K-quants' 256-wide super-blocks (else dummy falls back to Q4_0)
    o.shape.n_embd = width;
    o.shape.head_dim = width / o.shape.n_head;
    o.shape.n_ff = 2 * width;
  }
  o.dtype = dtype;
  o.std = 0.08f;  // sharper logits than the default, so argmax comparisons mean something
  o.seed = 11;
  const std::string path =
      test::temp_dir() + "/gpu-fwd-" + shape + "-" + dtype_name(dtype) + "-" + std::to_string(width) + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error();
  return m.ok() ? *m : nullptr;
}

KvLayout layout_for(const Model& m, int64_t blocks, DType kv = DType::F16) {
  const ModelConfig& c = m.config();
  return {c.n_layer, c.n_head_kv, c.head_dim, 16, blocks, kv};
}

// The backends under test: the host oracle and the CUDA kernels on the CPU's emulator of CUDA always,
// CUDA when a device is visible (else it skips).
class GpuForwardOn : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda_emu" && heavy() && test::skip_emulator_model_runs())
      GTEST_SKIP() << "a whole-model run on the CUDA emulator: the release build runs it (minutes under ASan; "
                      "TM_TEST_EMU_UNDER_ASAN=1 runs it here)";
    if (GetParam() != "cuda") return;
    auto d = gpu::gpu_devices();
    if (!d.ok()) GTEST_SKIP() << "no CUDA device: " << d.error();
  }
  // The cases that run whole models for many steps (all but the copied block's and launch/wait's few steps).
  static bool heavy() {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    return name.find("ACopiedBlock") == std::string::npos && name.find("LaunchAndWait") == std::string::npos &&
           name.find("EmbeddingRows") == std::string::npos;
  }
  gpu::Ops& ops() const {
    return GetParam() == "host" ? gpu_host_ops() : GetParam() == "cuda_emu" ? gpu::cuda_emu_ops() : gpu::cuda_ops();
  }
};

// Logits rows equal the reference's within the F16 KV cache's rounding: every difference below
// 2 % of the row's spread, and the same argmax unless the reference's top two are that close.
void expect_close(const float* got, const std::vector<float>& want, int64_t n, const std::string& where) {
  const float lo = *std::min_element(want.begin(), want.end()), hi = *std::max_element(want.begin(), want.end());
  const float tol = 0.02f * (hi - lo);
  float worst = 0.0f;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(got[i] - want[static_cast<size_t>(i)]));
  EXPECT_LE(worst, tol) << where;
  std::vector<float> sorted(want);
  std::sort(sorted.rbegin(), sorted.rend());
  if (sorted[0] - sorted[1] > 2 * tol) {
    EXPECT_EQ(argmax(got, n), argmax(want.data(), n)) << where;
  }
}

// Two sequences through three steps: A's 7-token prompt alone; A decodes while B's 5-token prompt
// runs as a chunk (all of B's rows get logits); both decode. Every logits row against the reference
// run of that sequence, token by token.
void check_mixed_batches(const std::shared_ptr<Model>& m, gpu::Ops& ops, const std::string& what) {
  const ModelConfig& c = m->config();
  auto f = GpuForward::create(m, ops, layout_for(*m, 8));
  ASSERT_TRUE(f.ok()) << what << ": " << f.error();
  const std::vector<int32_t> a = {1, 5, 9, 3, 7, 2, 8, 4, 6}, b = {2, 4, 6, 8, 1, 3, 5};
  ReferenceForward ra(m, 64), rb(m, 64);
  std::vector<std::vector<float>> want_a, want_b;
  for (size_t i = 0; i < a.size(); ++i) want_a.push_back(ra.forward(a[i], static_cast<int64_t>(i)));
  for (size_t i = 0; i < b.size(); ++i) want_b.push_back(rb.forward(b[i], static_cast<int64_t>(i)));
  const std::vector<int32_t> table_a = {5, 2}, table_b = {0, 7};  // out of order on purpose
  std::vector<float> lg;
  const int64_t V = c.n_vocab;

  ForwardBatch s1;  // A's prompt, 7 tokens, last row only
  s1.tokens.assign(a.begin(), a.begin() + 7);
  s1.seqs = {SeqSlice{0, 7, 0, table_a, SeqSlice::Logits::Last}};
  ASSERT_TRUE((*f)->run(s1, lg).ok());
  ASSERT_EQ(lg.size(), static_cast<size_t>(V));
  expect_close(lg.data(), want_a[6], V, what + ": A's prompt");

  ForwardBatch s2;  // A decodes position 7; B's 5-token prompt with every row's logits
  s2.tokens = {a[7], b[0], b[1], b[2], b[3], b[4]};
  s2.seqs = {SeqSlice{0, 1, 7, table_a, SeqSlice::Logits::Last}, SeqSlice{1, 5, 0, table_b, SeqSlice::Logits::All}};
  ASSERT_TRUE((*f)->run(s2, lg).ok());
  ASSERT_EQ(lg.size(), static_cast<size_t>(6 * V));
  expect_close(lg.data(), want_a[7], V, what + ": A's decode beside B's prompt");
  for (int i = 0; i < 5; ++i) expect_close(lg.data() + (1 + i) * V, want_b[i], V, what + ": B's prompt row " + std::to_string(i));

  ForwardBatch s3;  // both decode (B first this time)
  s3.tokens = {b[5], a[8]};
  s3.seqs = {SeqSlice{0, 1, 5, table_b, SeqSlice::Logits::Last}, SeqSlice{1, 1, 8, table_a, SeqSlice::Logits::Last}};
  ASSERT_TRUE((*f)->run(s3, lg).ok());
  ASSERT_EQ(lg.size(), static_cast<size_t>(2 * V));
  expect_close(lg.data(), want_b[5], V, what + ": B's decode");
  expect_close(lg.data() + V, want_a[8], V, what + ": A's decode");
}

TEST_P(GpuForwardOn, MixedBatchesMatchTheReferenceOnEveryDenseFamily) {
  for (const char* shape : {"tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-phi3", "tiny-mistral", "tiny-gemma2",
                            "tiny-gemma3", "tiny-gemma", "tiny-granite", "tiny-smollm3", "tiny-olmo2", "tiny-olmo3",
                            "tiny-exaone", "tiny-exaone4", "tiny-exaone4-swa", "tiny-ernie4_5", "tiny-glm4",
                            "tiny-mistral3", "tiny-seed-oss", "tiny-qwen2vl", "tiny-qwen3vl", "tiny-glm4v",
                            "tiny-minicpm", "tiny-internlm2", "tiny-xverse", "tiny-baichuan", "tiny-chatglm"})
    for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
      // the 64-layer EXAONE 4.0 and 32-layer Baichuan on the host oracle only: on the emulator they double
      // the test's time, and their parts (windows, NoPE layers, no pre-norms; the llama block) run there in
      // tiny-olmo3, tiny-smollm3, tiny-exaone4, tiny-llama
      if ((std::string(shape) == "tiny-exaone4-swa" || std::string(shape) == "tiny-baichuan") && GetParam() != "host")
        continue;
      auto m = dummy(shape, t);
      ASSERT_NE(m, nullptr);
      check_mixed_batches(m, ops(), std::string(shape) + " " + dtype_name(t));
    }
}

// mistral3's attention temperature where it is not 1: its floor (the YaRN original context, 64 in
// tiny-mistral3) brought down to 2 and its scale up to 20, so the mixed batches' positions (up to 9) get
// factors 1 .. 1 + 20 ln 5 -- large enough that leaving it out fails the comparison (checked).
TEST_P(GpuForwardOn, Mistral3AttentionTemperaturePastItsFloor) {
  for (DType t : {DType::F32, DType::Q8_0}) {
    auto m = dummy("tiny-mistral3", t);
    ASSERT_NE(m, nullptr);
    ModelConfig& c = const_cast<ModelConfig&>(m->config());
    c.attn_temp_floor = 2;
    c.attn_temp_scale = 20.0f;
    check_mixed_batches(m, ops(), std::string("mistral3 (floor 2, scale 20) ") + dtype_name(t));
  }
}

// Files of llama.cpp's other recipes, quantized from a dummy as `tokenmill quantize` does: Q2_K, Q3_K_M
// (Q3_K beside Q4_K/Q5_K/Q6_K tensors), Q5_K_M, the legacy Q4_1, Q5_0, Q5_1, and the i-quant that
// quantizes without an importance matrix, every matrix of that type (IQ3_S; the others need one; the kernel tests
// cover all seven).
TEST_P(GpuForwardOn, FilesOfEveryRecipeTheDeviceDecodesMatchTheReference) {
  const std::string dir = test::temp_dir();
  DummyOptions o;
  o.shape = *find_shape("tiny-llama");
  o.shape.n_embd = 256, o.shape.head_dim = 64, o.shape.n_ff = 512;
  o.std = 0.08f;
  ASSERT_TRUE(write_dummy_model(o, dir + "/f32.gguf").ok());
  for (const char* recipe : {"Q2_K", "Q3_K_M", "Q5_K_M", "Q4_1", "Q5_0", "Q5_1", "IQ3_S"}) {
    QuantizeModelOptions q;
    q.input = dir + "/f32.gguf";
    q.output = dir + "/" + recipe + ".gguf";
    q.recipe = *recipe_from_name(recipe);
    q.plan.pure = recipe[0] == 'I';  // (the i-quant recipes' mixes want an importance matrix; pure: every matrix the type)
    auto rep = quantize_model(q);
    ASSERT_TRUE(rep.ok()) << recipe << ": " << rep.error();
    auto m = Model::load(q.output);
    ASSERT_TRUE(m.ok()) << m.error();
    EXPECT_EQ((*m)->weights().layers[0].wq.type, q.recipe.default_type) << recipe;
    check_mixed_batches(*m, ops(), recipe);
  }
}

// The mixture-of-experts families: routing on the device (softmax / renormalized top-k / softmax over
// the top logits), the experts' products by expert id, qwen2moe's gated shared expert, olmoe's q/k
// norms over the whole projection, and gpt-oss (attention sinks, output and expert biases, the
// clamped SwiGLU, alternating windows, YaRN, MXFP4 experts).
TEST_P(GpuForwardOn, MixedBatchesMatchTheReferenceOnEveryMoeFamily) {
  // (DeepSeek-V3's routing -- sigmoid, selection bias, scale, dense first layers, ungated shared
  // experts -- in glm4moe and dots1, with q/k norms over whole projections in minimax-m2, softmax
  // with a selection bias in ernie4_5-moe, grouped routing and a fused attn_qkv in bailingmoe2, windows
  // with NoPE global layers in exaone-moe, softmax beside gated shared experts in deepseek: F32 and Q8_0)
  for (const char* shape : {"tiny-olmoe", "tiny-qwen3moe", "tiny-qwen2moe", "tiny-mixtral", "tiny-gpt-oss", "tiny-granitemoe",
                            "tiny-glm4moe", "tiny-minimax-m2", "tiny-dots1", "tiny-ernie4_5-moe", "tiny-bailingmoe2",
                            "tiny-exaone-moe", "tiny-qwen3vlmoe", "tiny-glm4v-moe", "tiny-minicpm-moe",
                            "tiny-deepseek-moe"})
    for (DType t : {DType::F32, DType::Q8_0, DType::Q4_0, DType::MXFP4}) {
      if ((t == DType::MXFP4) != (std::string(shape) == "tiny-gpt-oss") && t != DType::F32) continue;
      const std::string sh(shape);
      if (t == DType::Q4_0 && (sh == "tiny-glm4moe" || sh == "tiny-minimax-m2" || sh == "tiny-dots1" ||
                               sh == "tiny-ernie4_5-moe" || sh == "tiny-bailingmoe2" || sh == "tiny-exaone-moe" ||
                               sh == "tiny-glm4v-moe" || sh == "tiny-deepseek-moe"))
        continue;
      auto m = dummy(shape, t);
      ASSERT_NE(m, nullptr);
      check_mixed_batches(m, ops(), std::string(shape) + " " + dtype_name(t));
    }
}

// Six steps of two sequences: A's 19-token prompt (over a block boundary); A decodes beside B's
// 6-token prompt (every row's logits); then both decode four times.
std::vector<ForwardBatch> quantized_kv_steps() {
  const std::vector<int32_t> table_a = {5, 2}, table_b = {0, 7};
  std::vector<ForwardBatch> steps(2);
  for (int32_t i = 0; i < 19; ++i) steps[0].tokens.push_back((7 * i + 1) % 500);
  steps[0].seqs = {SeqSlice{0, 19, 0, table_a, SeqSlice::Logits::Last}};
  steps[1].tokens = {3, 11, 22, 33, 44, 55, 66};
  steps[1].seqs = {SeqSlice{0, 1, 19, table_a, SeqSlice::Logits::Last}, SeqSlice{1, 6, 0, table_b, SeqSlice::Logits::All}};
  for (int32_t k = 0; k < 4; ++k) {
    ForwardBatch d;
    d.tokens = {(13 * k + 5) % 500, (17 * k + 9) % 500};
    d.seqs = {SeqSlice{0, 1, 20 + k, table_a, SeqSlice::Logits::Last}, SeqSlice{1, 1, 6 + k, table_b, SeqSlice::Logits::Last}};
    steps.push_back(d);
  }
  return steps;
}

// --kv-cache-dtype int8, fp8 and q4_0 on the GPU: the same steps on the CPU forward over a cache of the same
// type give the same logits (within 2 % of each row's spread, the argmax where it is clear), and on the
// whole much closer than the CPU over an F16 cache -- the device really stores and reads the quantized
// tiles (the kernels' own tests: the stored bytes equal the CPU's, attention over them its reference).
// Head sizes 16 and 32 (one Q4 scale per head) and 64 (two); gemma2's window and soft-capping.
TEST_P(GpuForwardOn, QuantizedKvCachesMatchTheCpuForwardOverTheSameCache) {
  const auto steps = quantized_kv_steps();
  for (auto [shape, width] : {std::pair{"tiny-llama", 0}, std::pair{"tiny-gemma2", 0}, std::pair{"tiny-llama", 256}}) {
    auto m = dummy(shape, DType::F32, width);
    ASSERT_NE(m, nullptr);
    const ModelConfig& c = m->config();
    const int64_t V = c.n_vocab;
    Forward cpu(m, nullptr);
    auto on_cpu = [&](DType kv) {
      auto st = KvStorage::create(layout_for(*m, 8, kv));
      EXPECT_TRUE(st.ok());
      std::vector<std::vector<float>> out(steps.size());
      for (size_t i = 0; i < steps.size(); ++i) cpu.run(steps[i], *st, out[i]);
      return out;
    };
    const auto cpu_f16 = on_cpu(DType::F16);
    for (DType kv : {DType::I8, DType::F8_E4M3, DType::Q4_0}) {
      const std::string what = std::string(shape) + " head " + std::to_string(c.head_dim) + " " + dtype_name(kv);
      const auto want = on_cpu(kv);
      auto f = GpuForward::create(m, ops(), layout_for(*m, 8, kv));
      ASSERT_TRUE(f.ok()) << what << ": " << f.error();
      float worst_gpu = 0.0f, worst_type = 0.0f;
      double sum_same = 0, sum_f16 = 0;
      for (size_t i = 0; i < steps.size(); ++i) {
        std::vector<float> lg;
        ASSERT_TRUE((*f)->run(steps[i], lg).ok()) << what;
        ASSERT_EQ(lg.size(), want[i].size()) << what;
        for (size_t r = 0; r * static_cast<size_t>(V) < lg.size(); ++r) {
          const std::vector<float> row(want[i].begin() + r * V, want[i].begin() + (r + 1) * V);
          expect_close(lg.data() + r * V, row, V, what + " step " + std::to_string(i) + " row " + std::to_string(r));
        }
        for (size_t j = 0; j < lg.size(); ++j) {
          worst_gpu = std::max(worst_gpu, std::abs(lg[j] - want[i][j]));
          worst_type = std::max(worst_type, std::abs(cpu_f16[i][j] - want[i][j]));
          sum_same += std::abs(lg[j] - want[i][j]);
          sum_f16 += std::abs(lg[j] - cpu_f16[i][j]);
        }
      }
      // on the whole, at least twice as close to the CPU over this cache type as to the CPU over F16 (on
      // the emulator 4x for INT8 -- the tensor cores' and the CPU's roundings differ by about as much as
      // INT8's from F16 here -- and 40x or more for Q4)
      EXPECT_LT(sum_same, 0.5 * sum_f16) << what;
      std::printf("%s: largest |GPU - CPU| over the same cache %.2e (CPU: F16 cache vs this %.2e); summed %.3g vs %.3g "
                  "from the CPU over F16\n",
                  what.c_str(), worst_gpu, worst_type, sum_same, sum_f16);
    }
  }
}

// LoRA on the device (model/gpu_lora.h): steps binding two adapters at two scales beside sequences of
// the base model -- every matrix of every layer, output and token_embd where the model has them ("all",
// rank 8), and only
// attn_v (phi3: attn_qkv) and ffn_down (rank 4) -- against the CPU forward over the same steps: the same logits within
// 2 % of each row's spread (prompt chunks with every row's logits, decode steps, an adapter's output
// rows among the base model's), and far from the base model's. phi3's fused attn_qkv / ffn_up (row
// views), gemma2's tied output and soft-capping.
TEST_P(GpuForwardOn, LoraBindingsMatchTheCpuForward) {
  for (const char* shape : {"tiny-llama", "tiny-phi3", "tiny-gemma2"}) {
    SCOPED_TRACE(shape);
    const std::string dir = test::temp_dir();
    DummyOptions o;
    o.shape = *find_shape(shape);
    o.std = 0.08f;
    ASSERT_TRUE(write_dummy_model(o, dir + "/base.gguf").ok());
    auto lo = Model::load(dir + "/base.gguf");
    ASSERT_TRUE(lo.ok()) << lo.error();
    const std::shared_ptr<Model> m = *lo;
    std::vector<std::shared_ptr<const LoraAdapter>> ads;
    int i = 0;
    for (std::vector<std::string> targets :
         {std::vector<std::string>{"all"},
          std::vector<std::string>{std::string(shape) == "tiny-phi3" ? "attn_qkv" : "attn_v", "ffn_down"}}) {
      DummyLoraOptions lo_opts;
      lo_opts.base_path = dir + "/base.gguf";
      lo_opts.targets = targets;
      lo_opts.rank = i == 0 ? 8 : 4;
      lo_opts.seed = static_cast<uint64_t>(7 + i);
      lo_opts.spread = 0.3f;
      const std::string path = dir + "/lora" + std::to_string(i++) + ".gguf";
      const Status w = write_dummy_lora(lo_opts, path);
      ASSERT_TRUE(w.ok()) << w.error();
      auto a = LoraAdapter::load(path, *m);
      ASSERT_TRUE(a.ok()) << a.error();
      ads.push_back(*a);
    }
    // A (adapter 0 at 0.8), B (adapter 1), C (the base model), D (adapter 0 at 0.3)
    const std::vector<std::vector<int32_t>> tables = {{5, 2}, {0, 7}, {3}, {4, 6}};
    std::vector<ForwardBatch> steps(2);
    const std::vector<LoraBinding> bindings = {{ads[0].get(), 0.8f}, {ads[1].get(), 1.0f}, {ads[0].get(), 0.3f}};
    for (int32_t t = 0; t < 19; ++t) steps[0].tokens.push_back((7 * t + 1) % 500);
    for (int32_t t = 0; t < 5; ++t) steps[0].tokens.push_back((3 * t + 2) % 500);
    steps[0].seqs = {SeqSlice{0, 19, 0, tables[0], SeqSlice::Logits::Last, 0},
                     SeqSlice{19, 5, 0, tables[3], SeqSlice::Logits::All, 2}};
    steps[0].loras = bindings;
    steps[1].tokens = {3, 11, 22, 33, 44, 55, 66, 9, 8, 7, 6, 5};
    steps[1].seqs = {SeqSlice{0, 1, 19, tables[0], SeqSlice::Logits::Last, 0},
                     SeqSlice{1, 6, 0, tables[1], SeqSlice::Logits::All, 1},
                     SeqSlice{7, 4, 0, tables[2], SeqSlice::Logits::Last, -1},
                     SeqSlice{11, 1, 5, tables[3], SeqSlice::Logits::Last, 2}};
    steps[1].loras = bindings;
    for (int32_t k = 0; k < 3; ++k) {
      ForwardBatch d;
      d.tokens = {(13 * k + 5) % 500, (17 * k + 9) % 500, (19 * k + 4) % 500, (23 * k + 1) % 500};
      d.seqs = {SeqSlice{0, 1, 20 + k, tables[0], SeqSlice::Logits::Last, 0},
                SeqSlice{1, 1, 6 + k, tables[1], SeqSlice::Logits::Last, 1},
                SeqSlice{2, 1, 4 + k, tables[2], SeqSlice::Logits::Last, -1},
                SeqSlice{3, 1, 6 + k, tables[3], SeqSlice::Logits::Last, 2}};
      d.loras = bindings;
      steps.push_back(d);
    }
    const int64_t V = m->config().n_vocab;
    Forward cpu(m, nullptr);
    auto on_cpu = [&](bool with_loras) {
      auto kv = KvStorage::create(layout_for(*m, 8));
      EXPECT_TRUE(kv.ok());
      std::vector<std::vector<float>> out(steps.size());
      for (size_t s = 0; s < steps.size(); ++s) {
        ForwardBatch b = steps[s];
        if (!with_loras) {
          b.loras.clear();
          for (SeqSlice& q : b.seqs) q.lora = -1;
        }
        cpu.run(b, *kv, out[s]);
      }
      return out;
    };
    const auto want = on_cpu(true), base = on_cpu(false);
    auto f = GpuForward::create(m, ops(), layout_for(*m, 8), GpuForwardOptions{8, 4});  // graphs on: not for these steps
    ASSERT_TRUE(f.ok()) << f.error();
    float moved = 0.0f;
    for (size_t s = 0; s < steps.size(); ++s) {
      std::vector<float> lg;
      ASSERT_TRUE((*f)->run(steps[s], lg).ok()) << "step " << s;
      ASSERT_EQ(lg.size(), want[s].size());
      for (size_t r = 0; r * static_cast<size_t>(V) < lg.size(); ++r) {
        const std::vector<float> row(want[s].begin() + r * V, want[s].begin() + (r + 1) * V);
        expect_close(lg.data() + r * V, row, V, "step " + std::to_string(s) + " row " + std::to_string(r));
      }
      for (size_t j = 0; j < lg.size(); ++j) moved = std::max(moved, std::abs(want[s][j] - base[s][j]));
    }
    EXPECT_GT(moved, 0.5f);  // the adapters change the logits: the test means something
    EXPECT_EQ((*f)->graph_stats().replayed, 0);  // steps with bindings run eagerly
    EXPECT_GT((*f)->lora_device_bytes(), 0u);
  }
}

// CUDA graphs (GpuForwardOptions): decode steps replay one graph per batch bucket with the step's data
// behind the pointers it was captured with. The logits equal the eager forward's (bit for bit on the
// host backend, whose per-token math does not depend on the batch) while sequences join and leave
// (buckets 1, 2, 4, 8, padded), their block tables cross block boundaries, and a larger eager step
// regrows the scratch (the graphs are dropped and captured again on the new buffers).
TEST_P(GpuForwardOn, DecodeGraphsGiveTheEagerLogits) {
  const bool exact = GetParam() == "host";
  for (auto [shape, dtype] : {std::pair{"tiny-llama", DType::Q8_0}, std::pair{"tiny-olmoe", DType::Q4_0},
                              std::pair{"tiny-gemma2", DType::F32}}) {
    SCOPED_TRACE(shape);
    auto m = dummy(shape, dtype);
    ASSERT_NE(m, nullptr);
    const int64_t V = m->config().n_vocab;
    auto eager = GpuForward::create(m, ops(), layout_for(*m, 48));
    auto graph = GpuForward::create(m, ops(), layout_for(*m, 48), GpuForwardOptions{8, 6});
    ASSERT_TRUE(eager.ok()) << eager.error();
    ASSERT_TRUE(graph.ok()) << graph.error();
    std::vector<float> le, lg;
    auto both = [&](const ForwardBatch& b, const std::string& where) {
      ASSERT_TRUE((*eager)->run(b, le).ok()) << where;
      ASSERT_TRUE((*graph)->run(b, lg).ok()) << where;
      ASSERT_EQ(le.size(), lg.size()) << where;
      if (exact) {
        EXPECT_TRUE(std::equal(le.begin(), le.end(), lg.begin())) << where;
      } else {
        for (size_t r = 0; r * static_cast<size_t>(V) < le.size(); ++r)
          expect_close(lg.data() + r * V, std::vector<float>(le.begin() + r * V, le.begin() + (r + 1) * V), V, where);
      }
    };
    // six sequences of 6 blocks each, prompts of 3, 8, ..., 28 tokens in one eager step
    constexpr int kSeqs = 6;
    std::vector<int32_t> pos(kSeqs);
    std::vector<std::vector<int32_t>> tables(kSeqs);
    ForwardBatch prompts;
    for (int i = 0; i < kSeqs; ++i) {
      for (int b = 0; b < 6; ++b) tables[i].push_back(static_cast<int32_t>(6 * (kSeqs - 1 - i) + b));
      pos[i] = 3 + 5 * i;
      SeqSlice s{static_cast<int32_t>(prompts.tokens.size()), pos[i], 0, tables[i], SeqSlice::Logits::Last};
      for (int t = 0; t < pos[i]; ++t) prompts.tokens.push_back((7 * i + 3 * t + 1) % static_cast<int32_t>(V));
      prompts.seqs.push_back(s);
    }
    both(prompts, "prompts");
    const auto captured_before_regrow = [&] { return (*graph)->graph_stats().captured; };
    int64_t decode_steps = 0, captured_mid = 0;
    for (int step = 0; step < 30; ++step) {
      if (step == 15) {  // a 100-token prompt (eager; more tokens than the first step: the scratch regrows)
        captured_mid = captured_before_regrow();
        ForwardBatch p;
        for (int t = 0; t < 100; ++t) p.tokens.push_back((5 * t + 2) % static_cast<int32_t>(V));
        p.seqs = {SeqSlice{0, 100, 0, {40, 41, 42, 43, 44, 45, 46}, SeqSlice::Logits::Last}};
        both(p, "the long prompt");
      }
      ForwardBatch d;  // a rotating subset of 1..6 sequences
      const int n = 1 + (step * 5) % kSeqs;
      for (int j = 0; j < n; ++j) {
        const int i = (step + j) % kSeqs;
        const std::vector<int32_t> used(tables[i].begin(), tables[i].begin() + pos[i] / 16 + 1);  // grows as a scheduler's
        d.seqs.push_back(SeqSlice{j, 1, pos[i], used, SeqSlice::Logits::Last});
        d.tokens.push_back((11 * step + 13 * i) % static_cast<int32_t>(V));
        ++pos[i];
      }
      both(d, "decode step " + std::to_string(step));
      ++decode_steps;
    }
    const auto st = (*graph)->graph_stats();
    EXPECT_EQ(st.replayed, decode_steps);                // every decode step ran on a graph
    EXPECT_GE(captured_mid, 4);                          // buckets 1, 2, 4, 8 before the regrow
    EXPECT_GT(st.captured, captured_mid);                // captured again on the regrown scratch
    EXPECT_LT(st.captured, decode_steps);                // and replayed, not captured each step
    // a prompt chunk stays eager
    EXPECT_EQ((*eager)->graph_stats().replayed, 0);
  }
}

// The padded batch sizes graphs are captured for: powers of two to 8, then multiples of 8, capped.
TEST(GpuForward, GraphBucketsArePowersOfTwoThenMultiplesOfEight) {
  const std::vector<std::pair<int64_t, int64_t>> want = {{1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8},  {8, 8},
                                                         {9, 16}, {16, 16}, {17, 24}, {63, 64}, {250, 256}};
  for (auto [n, b] : want) EXPECT_EQ(GpuForward::graph_bucket(n, 512), b) << n;
  EXPECT_EQ(GpuForward::graph_bucket(250, 252), 252);  // a cap that is no multiple of 8
}

// A block copied (copy-on-write) serves a second sequence exactly as the original serves the first.
TEST_P(GpuForwardOn, ACopiedBlockContinuesLikeItsSource) {
  {
    auto m = dummy("tiny-llama", DType::Q8_0);
    ASSERT_NE(m, nullptr);
    auto f = GpuForward::create(m, ops(), layout_for(*m, 6));
    ASSERT_TRUE(f.ok()) << f.error();
    std::vector<int32_t> prompt(16);
    for (int i = 0; i < 16; ++i) prompt[static_cast<size_t>(i)] = 3 + i;
    ForwardBatch p;
    p.tokens = prompt;
    p.seqs = {SeqSlice{0, 16, 0, {1}, SeqSlice::Logits::Last}};
    std::vector<float> lg, la, lb;
    ASSERT_TRUE((*f)->run(p, lg).ok());
    ASSERT_TRUE((*f)->copy_block(1, 4).ok());
    ForwardBatch d;
    d.tokens = {9, 9};
    d.seqs = {SeqSlice{0, 1, 16, {1, 2}, SeqSlice::Logits::Last}, SeqSlice{1, 1, 16, {4, 5}, SeqSlice::Logits::Last}};
    ASSERT_TRUE((*f)->run(d, lg).ok());
    const auto V = static_cast<std::ptrdiff_t>(m->config().n_vocab);
    EXPECT_TRUE(std::equal(lg.begin(), lg.begin() + V, lg.begin() + V));
    EXPECT_FALSE((*f)->copy_block(1, 6).ok());  // out of range
  }
}

// launch + wait (the engine's async scheduling: the host works between them) give what run gives:
// logits, the device's argmax, hidden states, a step without logits rows; a copy queued between a
// launch and its wait runs after the step. Misuse is an error: wait without a launch, a second launch
// before the wait, a wait asking for other results than its launch computed.
TEST_P(GpuForwardOn, LaunchAndWaitAreRunInTwoHalves) {
  auto m = dummy("tiny-llama", DType::Q8_0);
  ASSERT_NE(m, nullptr);
  const auto V = static_cast<size_t>(m->config().n_vocab);
  auto a = GpuForward::create(m, ops(), layout_for(*m, 8));
  auto b = GpuForward::create(m, ops(), layout_for(*m, 8), GpuForwardOptions{4, 4});  // (b: decode graphs)
  ASSERT_TRUE(a.ok()) << a.error();
  ASSERT_TRUE(b.ok()) << b.error();
  ForwardBatch p;  // a prompt of 20 and one of 5 tokens
  for (int t = 0; t < 25; ++t) p.tokens.push_back(3 + (7 * t) % 200);
  p.seqs = {SeqSlice{0, 20, 0, {1, 2}, SeqSlice::Logits::Last}, SeqSlice{20, 5, 0, {3}, SeqSlice::Logits::Last}};
  std::vector<float> la, lb;
  std::vector<int32_t> ia, ib;
  ASSERT_TRUE((*a)->run(p, la).ok());
  ASSERT_TRUE((*b)->launch(p).ok());
  ASSERT_TRUE((*b)->wait(lb).ok());
  EXPECT_EQ(la, lb);
  ASSERT_EQ(la.size(), 2 * V);
  ForwardBatch d;  // a decode step of both (graphs in b), with argmax, then with logits
  d.tokens = {9, 11};
  d.seqs = {SeqSlice{0, 1, 20, {1, 2}, SeqSlice::Logits::Last}, SeqSlice{1, 1, 5, {3}, SeqSlice::Logits::Last}};
  ASSERT_TRUE((*a)->run(d, la, &ia).ok());
  ASSERT_TRUE((*b)->launch(d, true).ok());
  EXPECT_FALSE((*b)->launch(d, true).ok());  // one step at a time
  ASSERT_TRUE((*b)->wait(lb, &ib).ok());
  EXPECT_EQ(ia, ib);
  ASSERT_EQ(ib.size(), 2u);
  EXPECT_TRUE(lb.empty());
  d.seqs[0].pos_begin = 21, d.seqs[1].pos_begin = 6;
  ASSERT_TRUE((*a)->run(d, la).ok());
  ASSERT_TRUE((*b)->launch(d).ok());
  ASSERT_TRUE((*b)->copy_block(3, 5).ok());  // queued after the step: the copy has the step's K/V
  ASSERT_TRUE((*b)->wait(lb).ok());
  EXPECT_EQ(argmax(la.data(), static_cast<int64_t>(V)), argmax(lb.data(), static_cast<int64_t>(V)));
  ForwardBatch c;  // sequence 1 continued on the copy: the same logits as on its own block
  c.tokens = {4};
  c.seqs = {SeqSlice{0, 1, 7, {5}, SeqSlice::Logits::Last}};
  ASSERT_TRUE((*b)->run(c, lb).ok());
  c.seqs[0].block_table = {3};
  ASSERT_TRUE((*b)->run(c, la).ok());
  EXPECT_EQ(la, lb);
  // hidden states; a chunk without logits rows
  ForwardBatch h = p;
  h.hidden = true;
  h.seqs = {SeqSlice{0, 20, 0, {6, 7}, SeqSlice::Logits::Last}};
  h.tokens.resize(20);
  ASSERT_TRUE((*b)->launch(h).ok());
  ASSERT_TRUE((*b)->wait(lb).ok());
  EXPECT_EQ(lb.size(), static_cast<size_t>(m->config().n_embd));
  EXPECT_FALSE((*b)->launch(h, true).ok());  // no argmax of hidden states
  ForwardBatch none = h;
  none.hidden = false;
  none.seqs[0].logits = SeqSlice::Logits::None;
  ASSERT_TRUE((*b)->launch(none).ok());
  EXPECT_FALSE((*b)->wait(lb, &ib).ok());  // asked for an argmax it did not launch
  EXPECT_FALSE((*b)->wait(lb).ok());                // nothing launched any more
  ASSERT_TRUE((*b)->launch(none).ok());
  ASSERT_TRUE((*b)->wait(lb).ok());
  EXPECT_TRUE(lb.empty());
}

// The step's embedding rows gathered on the device (the default: only token ids cross) give the
// logits of rows read on the host and uploaded (host_embeddings): gemma2 (scaled embeddings, tied
// output: the device shares the output matrix) and llama in Q8_0, a prompt and then decode steps
// replayed as graphs (the ids read from the graph's fixed input slot).
TEST_P(GpuForwardOn, EmbeddingRowsOnTheDeviceEqualTheHostsRows) {
  for (auto [shape, dtype] : {std::pair{"tiny-gemma2", DType::Q8_0}, std::pair{"tiny-llama", DType::Q8_0}}) {
    SCOPED_TRACE(shape);
    auto m = dummy(shape, dtype);
    ASSERT_NE(m, nullptr);
    GpuForwardOptions on_host{4, 4};
    on_host.host_embeddings = true;
    auto dev = GpuForward::create(m, ops(), layout_for(*m, 8), GpuForwardOptions{4, 4});
    auto host = GpuForward::create(m, ops(), layout_for(*m, 8), on_host);
    ASSERT_TRUE(dev.ok()) << dev.error();
    ASSERT_TRUE(host.ok()) << host.error();
    const int64_t V = m->config().n_vocab;
    std::vector<float> ld, lh;
    auto both = [&](const ForwardBatch& b, const std::string& where) {
      ASSERT_TRUE((*dev)->run(b, ld).ok()) << where;
      ASSERT_TRUE((*host)->run(b, lh).ok()) << where;
      ASSERT_EQ(ld.size(), lh.size()) << where;
      if (GetParam() == "host") {
        EXPECT_EQ(ld, lh) << where;
      } else {
        for (size_t r = 0; r * static_cast<size_t>(V) < ld.size(); ++r)
          expect_close(ld.data() + r * V, std::vector<float>(lh.begin() + r * V, lh.begin() + (r + 1) * V), V, where);
      }
    };
    ForwardBatch p;
    for (int t = 0; t < 20; ++t) p.tokens.push_back((13 * t + 5) % static_cast<int32_t>(V));
    p.seqs = {SeqSlice{0, 12, 0, {1}, SeqSlice::Logits::Last}, SeqSlice{12, 8, 0, {2}, SeqSlice::Logits::Last}};
    both(p, "prompts");
    for (int step = 0; step < 3; ++step) {
      ForwardBatch d;
      d.tokens = {static_cast<int32_t>((7 * step + 1) % V), static_cast<int32_t>((11 * step + 2) % V)};
      d.seqs = {SeqSlice{0, 1, 12 + step, {1}, SeqSlice::Logits::Last}, SeqSlice{1, 1, 8 + step, {2}, SeqSlice::Logits::Last}};
      both(d, "decode step " + std::to_string(step));
    }
    EXPECT_EQ((*dev)->graph_stats().replayed, 3);
  }
}

// The real stories260K model: 120 greedy tokens, one decode step at a time, the same as the reference.
TEST_P(GpuForwardOn, Stories260KGreedyEqualsTheReference) {
  {
    auto m = Model::load(test::source_path("models/stories260K/stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.error();
    const int64_t V = (*m)->config().n_vocab;
    auto f = GpuForward::create(*m, ops(), layout_for(**m, 16));
    ASSERT_TRUE(f.ok()) << f.error();
    ReferenceForward ref(*m, 256);
    SeqSlice s;
    for (int b = 0; b < 16; ++b) s.block_table.push_back(15 - b);
    int32_t t_ref = 1, t_gpu = 1;
    std::vector<float> lg;
    for (int pos = 0; pos < 120; ++pos) {
      const auto& lr = ref.forward(t_ref, pos);
      ForwardBatch batch;
      batch.tokens = {t_gpu};
      s.n_tokens = 1;
      s.pos_begin = pos;
      batch.seqs = {s};
      ASSERT_TRUE((*f)->run(batch, lg).ok());
      t_ref = argmax(lr.data(), V);
      t_gpu = argmax(lg.data(), V);
      ASSERT_EQ(t_ref, t_gpu) << "step " << pos;
    }
  }
}

TEST(GpuForward, WhatItDoesNotRunIsAClearError) {
  // a head the attention kernels do not take (more than 256 dimensions)
  const std::string dir = test::temp_dir();
  DummyOptions dop;
  dop.shape = *find_shape("tiny-llama");
  dop.shape.head_dim = 320;
  ASSERT_TRUE(write_dummy_model(dop, dir + "/wide.gguf").ok());
  auto wide = Model::load(dir + "/wide.gguf");
  ASSERT_TRUE(wide.ok()) << wide.error();
  for (gpu::Ops* o : {&gpu::cuda_emu_ops(), &gpu_host_ops()}) {
    auto st = gpu_forward_supports(**wide, *o);
    ASSERT_FALSE(st.ok()) << o->name();
    EXPECT_NE(st.error().find("head_dim 320"), std::string::npos) << st.error();
    EXPECT_NE(st.error().find((*wide)->config().arch.name), std::string::npos) << st.error();
  }
  // without CUDA every weight type is refused by the CUDA backend (the emulator's list is every type
  // llama.cpp's quantize writes: the kernel tests cover them all)
  if (!gpu::built_with_cuda()) {
    auto plain = dummy("tiny-llama", DType::F32);
    ASSERT_NE(plain, nullptr);
    auto st = gpu_forward_supports(*plain, gpu::cuda_ops());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().find("weight type"), std::string::npos) << st.error();
  }
  for (const char* shape : {"tiny-olmoe", "tiny-gpt-oss"}) {
    auto moe = dummy(shape, DType::F32);
    ASSERT_NE(moe, nullptr);
    EXPECT_TRUE(gpu_forward_supports(*moe, gpu_host_ops()).ok()) << shape;
  }
  {
    auto sc = dummy("tiny-starcoder2", DType::F32);  // LayerNorm with biases, the ungated FFN: CPU only
    ASSERT_NE(sc, nullptr);
    EXPECT_FALSE(gpu_forward_supports(*sc, gpu_host_ops()).ok());
    auto cr = dummy("tiny-command-r", DType::F32);  // LayerNorm and the parallel block: CPU only
    ASSERT_NE(cr, nullptr);
    auto crs = gpu_forward_supports(*cr, gpu_host_ops());
    ASSERT_FALSE(crs.ok());
    EXPECT_NE(crs.error().find("LayerNorm"), std::string::npos) << crs.error();
    auto l4 = dummy("tiny-llama4", DType::F32);  // chunked attention, weights on the experts' inputs: CPU only
    ASSERT_NE(l4, nullptr);
    auto l4s = gpu_forward_supports(*l4, gpu_host_ops());
    ASSERT_FALSE(l4s.ok());
    EXPECT_NE(l4s.error().find("llama4"), std::string::npos) << l4s.error();
    for (const char* shape : {"tiny-bloom", "tiny-baichuan-13b", "tiny-gpt2", "tiny-olmo", "tiny-plamo", "tiny-nemotron",
                              "tiny-deci", "tiny-phimoe", "tiny-openelm"}) {
      // ALiBi, learned positions, the q/k/v clamp (and the LayerNorm families): CPU only
      auto cl = dummy(shape, DType::F32);
      ASSERT_NE(cl, nullptr);
      auto cls = gpu_forward_supports(*cl, gpu_host_ops());
      ASSERT_FALSE(cls.ok()) << shape;
      if (std::string(shape) == "tiny-baichuan-13b") {
        EXPECT_NE(cls.error().find("ALiBi"), std::string::npos) << cls.error();
      }
    }
    auto g4 = dummy("tiny-gemma4", DType::F32);  // per-layer heads, shared K/V, per-layer embeddings: CPU only
    ASSERT_NE(g4, nullptr);
    auto g4s = gpu_forward_supports(*g4, gpu_host_ops());
    ASSERT_FALSE(g4s.ok());
    EXPECT_NE(g4s.error().find("gemma4"), std::string::npos) << g4s.error();
    auto ge = dummy("tiny-gemma-embedding", DType::F32);  // bidirectional attention: CPU only
    ASSERT_NE(ge, nullptr);
    auto ges = gpu_forward_supports(*ge, gpu_host_ops());
    ASSERT_FALSE(ges.ok());
    EXPECT_NE(ges.error().find("bidirectional"), std::string::npos) << ges.error();
    auto af = dummy("tiny-afmoe", DType::F32);  // the attention gate's own projection: CPU only
    ASSERT_NE(af, nullptr);
    auto afs = gpu_forward_supports(*af, gpu_host_ops());
    ASSERT_FALSE(afs.ok());
    EXPECT_NE(afs.error().find("afmoe"), std::string::npos) << afs.error();
    auto ds = dummy("tiny-deepseek2", DType::F32);  // latent attention: CPU only
    ASSERT_NE(ds, nullptr);
    auto st = gpu_forward_supports(*ds, gpu_host_ops());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().find("multi-head latent attention"), std::string::npos) << st.error();
  }
  auto llama = dummy("tiny-llama", DType::F32);
  ASSERT_NE(llama, nullptr);
  EXPECT_TRUE(gpu_forward_supports(*llama, gpu_host_ops()).ok());
  EXPECT_TRUE(gpu_forward_supports(*llama, gpu_host_ops(), DType::I8).ok());
  EXPECT_TRUE(gpu_forward_supports(*llama, gpu_host_ops(), DType::Q4_0).ok());
  auto st = gpu_forward_supports(*llama, gpu_host_ops(), DType::BF16);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("KV cache type"), std::string::npos) << st.error();
  // a layout of another model, and a LoRA batch
  KvLayout wrong = layout_for(*llama, 4);
  wrong.n_layer += 1;
  EXPECT_FALSE(GpuForward::create(llama, gpu_host_ops(), wrong).ok());
  auto f = GpuForward::create(llama, gpu_host_ops(), layout_for(*llama, 4));
  ASSERT_TRUE(f.ok()) << f.error();
  ForwardBatch b;
  b.tokens = {1};
  b.seqs = {SeqSlice{0, 1, 0, {0}, SeqSlice::Logits::Last, 0}};
  b.loras = {LoraBinding{}};
  std::vector<float> lg;
  auto r = (*f)->run(b, lg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("LoRA"), std::string::npos) << r.error();
  // a block outside the cache
  ForwardBatch outside;
  outside.tokens = {1};
  outside.seqs = {SeqSlice{0, 1, 0, {4}, SeqSlice::Logits::Last}};
  auto o = (*f)->run(outside, lg);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().find("outside the KV cache"), std::string::npos) << o.error();
  // a block table too short for the positions asked
  ForwardBatch shortb;
  shortb.tokens = {1, 2};
  shortb.seqs = {SeqSlice{0, 2, 15, {0}, SeqSlice::Logits::Last}};
  EXPECT_FALSE((*f)->run(shortb, lg).ok());
  // without CUDA the backend says how to get it
  if (!gpu::built_with_cuda()) {
    auto c = GpuForward::create(llama, gpu::cuda_ops(), layout_for(*llama, 4));
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().find("-DTM_CUDA=ON"), std::string::npos) << c.error();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GpuForwardOn, ::testing::Values("host", "cuda_emu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace tmill
