// The CUDA kernels (gpu/kernels.h) against the CPU oracle (kernels/matmul.h matmul_reference) on a
// real device. Without one -- tokenmill built without CUDA, or no GPU visible -- the device tests
// skip and say why; the API still answers with a clear error (checked here too). kernels_emu_test.cpp
// runs them all on the CPU's emulator of CUDA, on every machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "gpu/device.h"
#include "gpu/kernels.h"
#include "gpu/nvml.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "quant/quant.h"

namespace tmill::gpu {
namespace {

bool have_device(std::string* why) {
  auto d = gpu_devices();
  if (!d.ok()) *why = d.error();
  return d.ok();
}

#ifndef TM_CUDA_EMU  // (the emulated build always runs its kernels)
TEST(GpuKernels, WithoutCudaEveryCallSaysHowToBuildIt) {
  if (built_with_cuda()) GTEST_SKIP() << "built with CUDA";
  const auto d = gpu_devices();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().find("-DTM_CUDA=ON"), std::string::npos) << d.error();
  EXPECT_FALSE(DeviceBuffer::allocate(64).ok());
  EXPECT_FALSE(gemv(DType::Q8_0, nullptr, 1, 32, 34, nullptr, nullptr).ok());
  EXPECT_FALSE(gemv_supports(DType::Q8_0));
  EXPECT_FALSE(paged_attention_decode(GpuAttnArgs{}).ok());
}
#endif

TEST(GpuKernels, GemvMatchesTheCpuOracleForEveryType) {
  std::string why;
  if (!have_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t rows = 67, cols = 512;  // 67: the last block of 4 warps is partial
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> wf(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(cols));
  for (auto& v : wf) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::MXFP4, DType::IQ4_NL, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    ASSERT_TRUE(gemv_supports(t));
    const size_t rb = *dtype_row_bytes(t, static_cast<uint64_t>(cols));
    std::vector<uint8_t> w(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * cols, w.data() + r * rb, cols);
    const Matrix m{t, rows, cols, w.data(), rb, "w"};
    std::vector<float> want(static_cast<size_t>(rows));
    matmul_reference(m, x.data(), cols, want.data(), rows, 1);
    auto dw = DeviceBuffer::allocate(w.size());
    auto dx = DeviceBuffer::allocate(x.size() * 4);
    auto dy = DeviceBuffer::allocate(static_cast<size_t>(rows) * 4);
    ASSERT_TRUE(dw.ok() && dx.ok() && dy.ok());
    ASSERT_TRUE(dw->upload(w.data(), w.size()).ok());
    ASSERT_TRUE(dx->upload(x.data(), x.size() * 4).ok());
    ASSERT_TRUE(gemv(t, dw->get(), rows, cols, rb, static_cast<const float*>(dx->get()), static_cast<float*>(dy->get())).ok());
    const auto st = synchronize();
    ASSERT_TRUE(st.ok()) << st.error();
    std::vector<float> got(static_cast<size_t>(rows));
    ASSERT_TRUE(dy->download(got.data(), got.size() * 4).ok());
    for (int64_t r = 0; r < rows; ++r) {
      double mag = 0;
      std::vector<float> row(static_cast<size_t>(cols));
      dequantize_row(t, w.data() + r * rb, row.data(), cols);
      for (int64_t c = 0; c < cols; ++c) mag += std::fabs(static_cast<double>(row[c]) * x[c]);
      EXPECT_NEAR(got[r], want[r], 1e-5 * mag + 1e-6) << dtype_name(t) << " row " << r;
    }
  }
}

TEST(GpuKernels, RmsnormMatchesTheFormula) {
  std::string why;
  if (!have_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t rows = 3, n = 1000;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(rows * n)), wt(static_cast<size_t>(n)), got(x.size());
  for (auto& v : x) v = nd(rng);
  for (auto& v : wt) v = nd(rng);
  auto dx = DeviceBuffer::allocate(x.size() * 4), dw = DeviceBuffer::allocate(wt.size() * 4),
       dy = DeviceBuffer::allocate(x.size() * 4);
  ASSERT_TRUE(dx.ok() && dw.ok() && dy.ok());
  ASSERT_TRUE(dx->upload(x.data(), x.size() * 4).ok());
  ASSERT_TRUE(dw->upload(wt.data(), wt.size() * 4).ok());
  ASSERT_TRUE(rmsnorm(static_cast<const float*>(dx->get()), static_cast<const float*>(dw->get()),
                      static_cast<float*>(dy->get()), rows, n, 1e-5f)
                  .ok());
  ASSERT_TRUE(synchronize().ok());
  ASSERT_TRUE(dy->download(got.data(), got.size() * 4).ok());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[r * n + i], x[r * n + i] * scale * wt[i], 1e-5 * std::fabs(x[r * n + i] * scale * wt[i]) + 1e-6);
  }
}

}  // namespace
}  // namespace tmill::gpu

namespace tmill::gpu {
namespace {

// Decode attention on the GPU over a KV cache written by the CPU's paged_kv_store (the same F16 tile
// layout), against the CPU's reference kernel: two sequences of different lengths with scattered
// block tables, GQA groups of 4, head_dim 64, 80 (not a multiple of 32), 128 and 256 (the kernel's
// largest); plain, with a sliding window of 20 positions, and with gemma2's soft-capping of the scores.
TEST(GpuKernels, PagedAttentionDecodeMatchesTheCpuReference) {
  std::string why;
  if (!have_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  struct Variant {
    int64_t window;
    float softcap;
    bool sinks;
  };
  for (const Variant var : {Variant{0, 0.0f, false}, Variant{20, 0.0f, false}, Variant{0, 2.0f, false},
                            Variant{20, 0.0f, true}})
  for (int64_t hd : {64, 80, 128, 256}) {  // 256: gemma's, each lane 8 dimensions of V
    const int64_t n_head = 8, n_head_kv = 2, bs = 16, n_blocks = 12, max_blocks = 8;
    const int64_t n_ctx[2] = {37, 100};
    const size_t tb = kv_tile_bytes(DType::F16, hd, bs);
    std::vector<uint8_t> kc(tb * n_blocks * n_head_kv), vc(kc.size());
    PagedKvView view{kc.data(), vc.data(), DType::F16, n_head_kv, bs, hd};
    std::vector<int32_t> tables(2 * max_blocks, 0);
    for (int b = 0; b < 3; ++b) tables[b] = 11 - 2 * b;  // sequence 0: blocks 11, 9, 7
    const int32_t seq1[7] = {0, 2, 4, 6, 8, 1, 3};  // sequence 1: 100 positions in 7 blocks
    for (int b = 0; b < 7; ++b) tables[max_blocks + b] = seq1[b];
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(static_cast<size_t>(n_head_kv * hd)), v(k.size());
    for (int s = 0; s < 2; ++s)
      for (int64_t p = 0; p < n_ctx[s]; ++p) {
        for (auto& x : k) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        paged_kv_store(view, tables.data() + s * max_blocks, p, k.data(), v.data());
      }
    std::vector<float> q(static_cast<size_t>(2 * n_head * hd)), want(q.size()), got(q.size());
    for (auto& x : q) x = nd(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t G = n_head / n_head_kv;
    std::vector<float> sinks(static_cast<size_t>(n_head));  // gpt-oss: one logit per query head
    for (size_t i = 0; i < sinks.size(); ++i) sinks[i] = i % 2 ? 3.0f : -1.5f;
    for (int s = 0; s < 2; ++s)
      for (int64_t h = 0; h < n_head_kv; ++h)
        paged_attention_group_reference(q.data() + (s * n_head + h * G) * hd, G, h, view,
                                        tables.data() + s * max_blocks, n_ctx[s], scale,
                                        want.data() + (s * n_head + h * G) * hd,
                                        AttnMask{var.window > 0 && n_ctx[s] > var.window ? n_ctx[s] - var.window : 0,
                                                 var.softcap, var.sinks ? sinks.data() + h * G : nullptr});
    auto dk = DeviceBuffer::allocate(kc.size()), dv = DeviceBuffer::allocate(vc.size());
    auto dq = DeviceBuffer::allocate(q.size() * 4), dout = DeviceBuffer::allocate(q.size() * 4);
    auto dt = DeviceBuffer::allocate(tables.size() * 4), dn = DeviceBuffer::allocate(2 * 4);
    ASSERT_TRUE(dk.ok() && dv.ok() && dq.ok() && dout.ok() && dt.ok() && dn.ok());
    const int32_t nc[2] = {static_cast<int32_t>(n_ctx[0]), static_cast<int32_t>(n_ctx[1])};
    ASSERT_TRUE(dk->upload(kc.data(), kc.size()).ok() && dv->upload(vc.data(), vc.size()).ok());
    ASSERT_TRUE(dq->upload(q.data(), q.size() * 4).ok() && dt->upload(tables.data(), tables.size() * 4).ok());
    ASSERT_TRUE(dn->upload(nc, sizeof nc).ok());
    GpuAttnArgs a;
    a.q = static_cast<const float*>(dq->get());
    a.out = static_cast<float*>(dout->get());
    a.n_tokens = 2;
    a.n_head = n_head;
    a.n_head_kv = n_head_kv;
    a.head_dim = hd;
    a.k_tiles = static_cast<const uint8_t*>(dk->get());
    a.v_tiles = static_cast<const uint8_t*>(dv->get());
    a.block_size = bs;
    a.block_tables = static_cast<const int32_t*>(dt->get());
    a.max_blocks = max_blocks;
    a.n_ctx = static_cast<const int32_t*>(dn->get());
    a.scale = scale;
    a.window = var.window;
    a.softcap = var.softcap;
    auto dsinks = DeviceBuffer::allocate(sinks.size() * 4);
    ASSERT_TRUE(dsinks.ok() && dsinks->upload(sinks.data(), sinks.size() * 4).ok());
    a.sinks = var.sinks ? static_cast<const float*>(dsinks->get()) : nullptr;
    // one pass, then split-K: 3 and 8 splits (of 100 positions: whole 32-position shares, so some
    // splits are empty; with the window only one is not)
    auto dp = DeviceBuffer::allocate(static_cast<size_t>(attention_partial_floats(2, n_head, hd, 8)) * 4);
    ASSERT_TRUE(dp.ok());
    for (int64_t splits : {1, 3, 8}) {
      a.n_splits = splits;
      a.partial = static_cast<float*>(dp->get());
      a.partial_floats = attention_partial_floats(2, n_head, hd, 8);
      a.max_ctx = 100;
      EXPECT_EQ(attention_splits(a), splits);
      std::fill(got.begin(), got.end(), -1.0f);
      ASSERT_TRUE(dout->upload(got.data(), got.size() * 4).ok());
      ASSERT_TRUE(paged_attention_decode(a).ok());
      const auto st = synchronize();
      ASSERT_TRUE(st.ok()) << st.error();
      ASSERT_TRUE(dout->download(got.data(), got.size() * 4).ok());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-4f + 1e-4f * std::fabs(want[i]))
            << "hd " << hd << " window " << var.window << " softcap " << var.softcap << " sinks " << var.sinks << " splits "
            << splits << " i " << i;
    }
  }
}

// Prefill attention in tiles (a.tiles: a CTA per tile of a sequence's consecutive tokens and KV head,
// K/V staged in shared memory) against the CPU's reference, token by token with its causal limit: the
// last 13 and 21 positions of two sequences (38 and 100 positions cached, scattered blocks) as prompt
// chunks, GQA groups of 1, 4 and 8 (tiles of 8, 8 and 4 tokens), head_dim 64, 80, 128 and 256; plain,
// windowed (20), soft-capped and with sinks.
TEST(GpuKernels, PagedAttentionPrefillTilesMatchTheCpuReference) {
  std::string why;
  if (!have_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  struct Variant {
    int64_t window;
    float softcap;
    bool sinks;
  };
  struct Heads {
    int64_t n_head, n_head_kv;
  };
  for (const Heads hs : {Heads{2, 2}, Heads{8, 2}, Heads{16, 2}})
  for (const Variant var : {Variant{0, 0.0f, false}, Variant{20, 0.0f, false}, Variant{0, 2.0f, false},
                            Variant{20, 0.0f, true}})
  for (int64_t hd : {64, 80, 128, 256}) {
    const int64_t n_head = hs.n_head, n_head_kv = hs.n_head_kv, bs = 16, n_blocks = 12, max_blocks = 8;
    const int64_t cached[2] = {38, 100}, chunk[2] = {13, 21};
    const size_t tb = kv_tile_bytes(DType::F16, hd, bs);
    std::vector<uint8_t> kc(tb * n_blocks * n_head_kv), vc(kc.size());
    PagedKvView view{kc.data(), vc.data(), DType::F16, n_head_kv, bs, hd};
    std::vector<int32_t> seq_tables(2 * max_blocks, 0);
    for (int b = 0; b < 3; ++b) seq_tables[b] = 11 - 2 * b;  // sequence 0: blocks 11, 9, 7
    const int32_t seq1[7] = {0, 2, 4, 6, 8, 1, 3};
    for (int b = 0; b < 7; ++b) seq_tables[max_blocks + b] = seq1[b];
    std::mt19937 rng(static_cast<uint32_t>(17 + hd + n_head));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(static_cast<size_t>(n_head_kv * hd)), v(k.size());
    for (int sq = 0; sq < 2; ++sq)
      for (int64_t p = 0; p < cached[sq]; ++p) {
        for (auto& x : k) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        paged_kv_store(view, seq_tables.data() + sq * max_blocks, p, k.data(), v.data());
      }
    // the batch: each sequence's chunk of query tokens, with per-token tables and context lengths
    const int64_t N = chunk[0] + chunk[1];
    std::vector<int32_t> tables, nctx, tiles;
    const int64_t T = attention_tile_tokens(n_head, n_head_kv);
    for (int sq = 0; sq < 2; ++sq) {
      const int64_t first_tok = static_cast<int64_t>(nctx.size());
      for (int64_t i = 0; i < chunk[sq]; ++i) {
        tables.insert(tables.end(), seq_tables.begin() + sq * max_blocks, seq_tables.begin() + (sq + 1) * max_blocks);
        nctx.push_back(static_cast<int32_t>(cached[sq] - chunk[sq] + i + 1));
      }
      for (int64_t i = 0; i < chunk[sq]; i += T) {
        tiles.push_back(static_cast<int32_t>(first_tok + i));
        tiles.push_back(static_cast<int32_t>(std::min(T, chunk[sq] - i)));
      }
    }
    std::vector<float> q(static_cast<size_t>(N * n_head * hd)), want(q.size()), got(q.size(), -1.0f);
    for (auto& x : q) x = nd(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t G = n_head / n_head_kv;
    std::vector<float> sinks(static_cast<size_t>(n_head));
    for (size_t i = 0; i < sinks.size(); ++i) sinks[i] = i % 2 ? 3.0f : -1.5f;
    for (int64_t t = 0; t < N; ++t)
      for (int64_t h = 0; h < n_head_kv; ++h) {
        const int64_t n = nctx[static_cast<size_t>(t)];
        paged_attention_group_reference(q.data() + (t * n_head + h * G) * hd, G, h, view, tables.data() + t * max_blocks, n,
                                        scale, want.data() + (t * n_head + h * G) * hd,
                                        AttnMask{var.window > 0 && n > var.window ? n - var.window : 0, var.softcap,
                                                 var.sinks ? sinks.data() + h * G : nullptr});
      }
    auto dk = DeviceBuffer::allocate(kc.size()), dv = DeviceBuffer::allocate(vc.size());
    auto dq = DeviceBuffer::allocate(q.size() * 4), dout = DeviceBuffer::allocate(q.size() * 4);
    auto dt = DeviceBuffer::allocate(tables.size() * 4), dn = DeviceBuffer::allocate(nctx.size() * 4);
    auto dtiles = DeviceBuffer::allocate(tiles.size() * 4), dsinks = DeviceBuffer::allocate(sinks.size() * 4);
    ASSERT_TRUE(dk.ok() && dv.ok() && dq.ok() && dout.ok() && dt.ok() && dn.ok() && dtiles.ok() && dsinks.ok());
    ASSERT_TRUE(dk->upload(kc.data(), kc.size()).ok() && dv->upload(vc.data(), vc.size()).ok());
    ASSERT_TRUE(dq->upload(q.data(), q.size() * 4).ok() && dt->upload(tables.data(), tables.size() * 4).ok());
    ASSERT_TRUE(dn->upload(nctx.data(), nctx.size() * 4).ok() && dtiles->upload(tiles.data(), tiles.size() * 4).ok());
    ASSERT_TRUE(dsinks->upload(sinks.data(), sinks.size() * 4).ok() && dout->upload(got.data(), got.size() * 4).ok());
    GpuAttnArgs a;
    a.q = static_cast<const float*>(dq->get());
    a.out = static_cast<float*>(dout->get());
    a.n_tokens = N;
    a.n_head = n_head;
    a.n_head_kv = n_head_kv;
    a.head_dim = hd;
    a.k_tiles = static_cast<const uint8_t*>(dk->get());
    a.v_tiles = static_cast<const uint8_t*>(dv->get());
    a.block_size = bs;
    a.block_tables = static_cast<const int32_t*>(dt->get());
    a.max_blocks = max_blocks;
    a.n_ctx = static_cast<const int32_t*>(dn->get());
    a.scale = scale;
    a.window = var.window;
    a.softcap = var.softcap;
    a.sinks = var.sinks ? static_cast<const float*>(dsinks->get()) : nullptr;
    a.max_ctx = 100;
    a.tiles = static_cast<const int32_t*>(dtiles->get());
    a.n_tiles = static_cast<int64_t>(tiles.size() / 2);
    ASSERT_TRUE(paged_attention_decode(a).ok());
    const auto st = synchronize();
    ASSERT_TRUE(st.ok()) << st.error();
    ASSERT_TRUE(dout->download(got.data(), got.size() * 4).ok());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4f + 1e-4f * std::fabs(want[i]))
          << "heads " << n_head << "/" << n_head_kv << " hd " << hd << " window " << var.window << " softcap "
          << var.softcap << " sinks " << var.sinks << " token " << i / static_cast<size_t>(n_head * hd);
  }
  EXPECT_EQ(attention_tile_tokens(32, 8), 8);
  EXPECT_EQ(attention_tile_tokens(16, 2), 4);
  EXPECT_EQ(attention_tile_tokens(64, 1), 1);
}

// The automatic split count: one pass for short contexts or many (token, KV head) pairs, more for long
// contexts with few pairs, never more than the partial scratch holds (none: never split).
TEST(GpuKernels, AttentionSplitsFollowContextAndBatch) {
  GpuAttnArgs a;
  a.n_head = 32, a.n_head_kv = 8, a.head_dim = 128, a.n_tokens = 1;
  a.partial_floats = attention_partial_capacity(a.n_head, a.n_head_kv, a.head_dim);
  float dummy = 0.0f;
  a.partial = &dummy;  // only its presence matters to the choice
  a.max_ctx = 300;
  EXPECT_EQ(attention_splits(a), 1);
  a.max_ctx = 32768;
  EXPECT_EQ(attention_splits(a), 32);  // 1 token x 8 KV heads: 64 splits' worth of positions, capped at 32
  a.n_tokens = 64;                      // 512 pairs: the GPU is full without splitting
  EXPECT_EQ(attention_splits(a), 1);
  a.n_tokens = 8;                       // 64 pairs: 1024 / 64 = 16 splits at most
  EXPECT_EQ(attention_splits(a), 16);
  EXPECT_LE(attention_partial_floats(a.n_tokens, a.n_head, a.head_dim, attention_splits(a)), a.partial_floats);
  a.partial = nullptr;
  EXPECT_EQ(attention_splits(a), 1);
}

TEST(GpuKernels, SiluMulMatchesTheFormula) {
  std::string why;
  if (!have_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t n = 1000;
  std::vector<float> g(n), u(n), got(n);
  for (int64_t i = 0; i < n; ++i) g[i] = (i - 500) / 37.0f, u[i] = (i % 17) / 5.0f - 1.0f;
  auto dg = DeviceBuffer::allocate(n * 4), du = DeviceBuffer::allocate(n * 4);
  ASSERT_TRUE(dg.ok() && du.ok());
  ASSERT_TRUE(dg->upload(g.data(), n * 4).ok() && du->upload(u.data(), n * 4).ok());
  ASSERT_TRUE(silu_mul(static_cast<float*>(dg->get()), static_cast<const float*>(du->get()), n).ok());
  ASSERT_TRUE(synchronize().ok());
  ASSERT_TRUE(dg->download(got.data(), n * 4).ok());
  for (int64_t i = 0; i < n; ++i) {
    const float want = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    EXPECT_NEAR(got[i], want, 1e-5f + 1e-5f * std::fabs(want)) << i;
  }
}

}  // namespace
}  // namespace tmill::gpu

namespace tmill::gpu {
namespace {

#ifndef TM_CUDA_EMU  // (NVML is the driver's: kernels_emu_test.cpp's emulated device has none)
// NVML (loaded from the driver at run time): the device's memory and utilization on a GPU machine;
// elsewhere an error that says why, never a crash or a failed start.
TEST(GpuNvml, UsageOnADeviceAndAClearErrorElsewhere) {
  auto u = nvml_usage(0);
  if (!gpu_devices().ok()) {
    if (u.ok()) GTEST_SKIP() << "NVML answers without a CUDA device (driver without a usable GPU for this build)";
    EXPECT_FALSE(u.error().empty());
    EXPECT_NE(u.error().find("NVML"), std::string::npos) << u.error();
    return;
  }
  ASSERT_TRUE(u.ok()) << u.error();
  EXPECT_GT(u->memory_total_bytes, 0u);
  EXPECT_LE(u->memory_used_bytes, u->memory_total_bytes);
  EXPECT_GE(u->utilization, 0.0);
  EXPECT_LE(u->utilization, 1.0);
  EXPECT_FALSE(nvml_usage(1000).ok());  // no such device
}
#endif

}  // namespace
}  // namespace tmill::gpu
