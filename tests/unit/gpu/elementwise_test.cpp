// The GPU forward's own kernels (gpu/kernels.h: gemm over several tokens, add, add_rows, rope,
// kv_store) against their CPU oracles, on a device (skipped, saying why, without one): the multi-token
// product against matmul_reference, RoPE bitwise against rope_heads_cs (same products, no FMA), and
// the K/V store bytewise against paged_kv_store's tiles. elementwise_emu_test.cpp runs them on the
// CPU's emulator of CUDA, on every machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "test_support.h"
#include "core/dtype.h"
#include "gpu/device.h"
#include "gpu/kernels.h"
#include "gpu/ops.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/gpu_host_ops.h"
#include "quant/quant.h"
#include "weight_types.h"

namespace tmill::gpu {
namespace {

bool skip_without_device(std::string* why) {
  auto d = gpu_devices();
  if (!d.ok()) *why = d.error();
  return !d.ok();
}

template <class T>
DeviceBuffer put(const std::vector<T>& v) {
  auto b = DeviceBuffer::allocate(v.size() * sizeof(T));
  EXPECT_TRUE(b.ok());
  EXPECT_TRUE(b->upload(v.data(), v.size() * sizeof(T)).ok());
  return std::move(b).value();
}

template <class T>
std::vector<T> get(const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  EXPECT_TRUE(synchronize().ok());
  EXPECT_TRUE(b.download(v.data(), n * sizeof(T)).ok());
  return v;
}

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// 19 tokens: two tiles of 8 and a partial one; 256 columns take the 16-byte loads of F16/BF16 rows,
// 96 columns the element-wise path.
TEST(GpuKernels, GemmOverSeveralTokensMatchesTheCpuOracle) {
  std::string why;
  if (skip_without_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t rows = 37, n = 19;
  for (int64_t cols : {256, 96}) {
    const auto wf = randn(static_cast<size_t>(rows * cols), 1), x = randn(static_cast<size_t>(n * cols), 2);
    for (DType t : device_weight_types()) {
      if (cols % test_block(t) != 0) continue;
      const size_t rb = *dtype_row_bytes(t, static_cast<uint64_t>(cols));
      std::vector<uint8_t> w(rb * rows);
      for (int64_t r = 0; r < rows; ++r) quantize_test_row(t, wf.data() + r * cols, w.data() + r * rb, cols);
      std::vector<float> want(static_cast<size_t>(n * rows));
      matmul_reference(Matrix{t, rows, cols, w.data(), rb, "w"}, x.data(), cols, want.data(), rows, n);
      auto dw = put(w), dx = put(x);
      auto dy = DeviceBuffer::allocate(want.size() * 4);
      ASSERT_TRUE(dy.ok());
      ASSERT_TRUE(gemm(t, dw.get(), rows, cols, rb, static_cast<const float*>(dx.get()), n, static_cast<float*>(dy->get())).ok());
      const auto got = get<float>(*dy, want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << dtype_name(t) << " cols " << cols << " " << i;
    }
  }
}

TEST(GpuKernels, AddAndAddRowsAreExact) {
  std::string why;
  if (skip_without_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t rows = 3, n = 300;
  auto y = randn(static_cast<size_t>(rows * n), 3);
  const auto x = randn(y.size(), 4), b = randn(static_cast<size_t>(n), 5);
  auto dy = put(y), dx = put(x), db = put(b);
  ASSERT_TRUE(add(static_cast<float*>(dy.get()), static_cast<const float*>(dx.get()), rows * n, 1.0f).ok());
  ASSERT_TRUE(add_rows(static_cast<float*>(dy.get()), static_cast<const float*>(db.get()), rows, n).ok());
  const auto got = get<float>(dy, y.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(r * n + i);
      EXPECT_EQ(got[k], (y[k] + x[k]) + b[static_cast<size_t>(i)]) << k;
    }
  // granite: y += s * x (the product rounded, then the sum: the CPU's axpy), then x *= s
  auto dz = put(y);
  ASSERT_TRUE(add(static_cast<float*>(dz.get()), static_cast<const float*>(dx.get()), rows * n, 0.22f).ok());
  ASSERT_TRUE(scale(static_cast<float*>(dz.get()), rows * n, 0.125f).ok());
  const auto got2 = get<float>(dz, y.size());
  std::vector<float> want = y;
  axpy(want.data(), x.data(), 0.22f, rows * n);
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got2[k], want[k] * 0.125f) << k;
  // mistral3's attention temperature: row t times 1 + 0.1 ln(floor(pos[t] / 64) + 1)
  const std::vector<int32_t> pos = {0, 63, 64, 200};
  std::vector<float> q = randn(4 * 8, 7);
  auto dq = put(q);
  auto dpos = put(pos);
  ASSERT_TRUE(attn_temperature(static_cast<float*>(dq.get()), static_cast<const int32_t*>(dpos.get()), 4, 8, 0.1f, 64).ok());
  const auto gotq = get<float>(dq, q.size());
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 8; ++i) {
      const float f = std::log(std::floor(static_cast<float>(pos[t]) / 64.0f) + 1.0f) * 0.1f + 1.0f;
      EXPECT_NEAR(gotq[t * 8 + i], q[t * 8 + i] * f, 1e-6f * (1 + std::fabs(q[t * 8 + i]))) << t << " " << i;
      if (t < 2) EXPECT_EQ(gotq[t * 8 + i], q[t * 8 + i]);  // within the first 64 positions: 1 exactly
    }
}

TEST(GpuKernels, RopeIsBitwiseTheCpuRotation) {
  std::string why;
  if (skip_without_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t n_tok = 4, heads = 3, hd = 64;
  for (bool neox : {false, true})
    for (int64_t n_rot : {64, 32}) {
      const int64_t half = n_rot / 2;
      auto x = randn(static_cast<size_t>(n_tok * heads * hd), 6);
      std::vector<float> cs(static_cast<size_t>(n_tok * half)), sn(cs.size());
      const auto inv = rope_inv_freq(n_rot, 10000.0f, nullptr);
      for (int64_t t = 0; t < n_tok; ++t) rope_cos_sin(static_cast<float>(t * 7 + 3), inv.data(), half, cs.data() + t * half, sn.data() + t * half);
      auto dx = put(x), dc = put(cs), ds = put(sn);
      GpuRopeArgs a{static_cast<float*>(dx.get()), n_tok, heads, hd, n_rot, static_cast<const float*>(dc.get()),
                    static_cast<const float*>(ds.get()), neox};
      ASSERT_TRUE(rope(a).ok());
      const auto got = get<float>(dx, x.size());
      for (int64_t t = 0; t < n_tok; ++t) rope_heads_cs(x.data() + t * heads * hd, heads, hd, n_rot, cs.data() + t * half, sn.data() + t * half, neox);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], x[i]) << "neox " << neox << " n_rot " << n_rot << " " << i;
    }
}

// Every cache type the device claims -- F16, INT8 and FP8 (a scale per position; FP8's codes from
// core/fp8.h on both sides) and Q4 (4-bit codes, scales per 32 dimensions at head_dim 64, one per head
// at 80): the same bytes as the CPU's store, into caches holding the same random bytes before
// (a Q4 K byte holds two positions' nibbles -- 14 and 15 come in one launch, 16 shares its byte with
// what was there -- and neither store may touch the other's).
TEST(GpuKernels, KvStoreWritesTheCpuTilesByteForByte) {
  std::string why;
  if (skip_without_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  for (DType kv : kKvCacheTypes)
    for (int64_t hd : {64, 80}) {
      const int64_t n_tok = 5, nkv = 2, bs = 16, blocks = 6, max_blocks = 3;
      const size_t tb = kv_tile_bytes(kv, hd, bs);
      std::mt19937 rng(static_cast<uint32_t>(hd));
      std::vector<uint8_t> before(tb * blocks * nkv);
      for (auto& b : before) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> kc = before, vc = before;
      const PagedKvView view{kc.data(), vc.data(), kv, nkv, bs, hd};
      // tokens of two sequences: positions 14, 15, 16 of one (blocks 4, 1) and 0, 1 of another (block 3)
      const std::vector<int32_t> tables = {4, 1, 0, 4, 1, 0, 4, 1, 0, 3, 0, 0, 3, 0, 0};
      const std::vector<int32_t> pos = {14, 15, 16, 0, 1};
      auto k = randn(static_cast<size_t>(n_tok * nkv * hd), 7), v = randn(k.size(), 8);
      k[3] = 0.0f;  // a head whose largest magnitude is negative, and an all-zero one (scale 0)
      k[5] = -9.0f;
      std::fill(v.begin() + hd, v.begin() + 2 * hd, 0.0f);
      for (int64_t t = 0; t < n_tok; ++t)
        paged_kv_store(view, tables.data() + t * max_blocks, pos[static_cast<size_t>(t)], k.data() + t * nkv * hd,
                       v.data() + t * nkv * hd);
      ASSERT_NE(kc, before);
      auto dkt = put(before), dvt = put(before), dk = put(k), dv = put(v), dtab = put(tables), dpos = put(pos);
      GpuKvStoreArgs a;
      a.k = static_cast<const float*>(dk.get()), a.v = static_cast<const float*>(dv.get());
      a.k_tiles = static_cast<uint8_t*>(dkt.get()), a.v_tiles = static_cast<uint8_t*>(dvt.get());
      a.n_tokens = n_tok, a.n_head_kv = nkv, a.head_dim = hd, a.block_size = bs;
      a.block_tables = static_cast<const int32_t*>(dtab.get()), a.max_blocks = max_blocks;
      a.pos = static_cast<const int32_t*>(dpos.get());
      a.kv_dtype = kv;
      ASSERT_TRUE(kv_store(a).ok());
      EXPECT_EQ(get<uint8_t>(dkt, kc.size()), kc) << dtype_name(kv) << " hd " << hd;
      EXPECT_EQ(get<uint8_t>(dvt, vc.size()), vc) << dtype_name(kv) << " hd " << hd;
    }
  GpuKvStoreArgs bad;
  bad.n_tokens = 1, bad.block_size = 16, bad.max_blocks = 1, bad.kv_dtype = DType::BF16;
  EXPECT_FALSE(kv_store(bad).ok());
  bad.kv_dtype = DType::Q4_0, bad.block_size = 15;
  EXPECT_FALSE(kv_store(bad).ok());
  EXPECT_TRUE(kv_cache_supports(DType::I8) && kv_cache_supports(DType::Q4_0) && kv_cache_supports(DType::F8_E4M3) &&
              kv_cache_supports(DType::F8_E5M2) && !kv_cache_supports(DType::F32));
}

// GeGLU and soft-capping (gemma) against the CPU's row ops (kernels/ops.h), within float rounding.
TEST(GpuKernels, GeluMulAndSoftcapMatchTheCpu) {
  std::string why;
  if (skip_without_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t n = 1000;
  auto g = randn(static_cast<size_t>(n), 9), u = randn(static_cast<size_t>(n), 10), x = randn(static_cast<size_t>(n), 11);
  for (auto& v : x) v *= 40.0f;
  auto dg = put(g), du = put(u), dx = put(x);
  ASSERT_TRUE(gelu_mul(static_cast<float*>(dg.get()), static_cast<const float*>(du.get()), n).ok());
  ASSERT_TRUE(softcap(static_cast<float*>(dx.get()), n, 30.0f).ok());
  EXPECT_FALSE(softcap(static_cast<float*>(dx.get()), n, 0.0f).ok());
  const auto got_g = get<float>(dg, g.size()), got_x = get<float>(dx, x.size());
  tmill::gelu_mul(g.data(), u.data(), n);
  softcap_inplace(x.data(), n, 30.0f);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(got_g[i], g[i], 1e-5f * (1.0f + std::fabs(g[i]))) << i;
    EXPECT_NEAR(got_x[i], x[i], 1e-5f * (1.0f + std::fabs(x[i]))) << i;
  }
}

// The MoE kernels against the host oracle's (model/gpu_host_ops.h, the CPU MoE's routing and sums):
// 5 tokens x 2 of 8 experts; the experts' products by id (gate/up reading each token's row, down each
// pair's), the routing (ids exact; softmax, renormalized, and softmax over the chosen), the weighted
// sum with a gated shared expert.
TEST(GpuKernels, MoeKernelsMatchTheHostOracle) {
  std::string why;
  if (skip_without_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  Ops& host = gpu_host_ops();
  const int64_t X = 8, K = 2, N = 5, rows = 37, cols = 256;
  std::vector<int32_t> ids = {0, 3, 1, 7, 3, 4, 0, 2, 6, 7};
  auto dids = put(ids);
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K}) {
    const size_t rb = *dtype_row_bytes(t, static_cast<uint64_t>(cols)), eb = rb * rows;
    const auto wf = randn(static_cast<size_t>(X * rows * cols), 21);
    std::vector<uint8_t> w(eb * X);
    for (int64_t r = 0; r < X * rows; ++r) quantize_test_row(t, wf.data() + r * cols, w.data() + r * rb, cols);
    for (int64_t x_div : {K, int64_t{1}}) {
      const auto x = randn(static_cast<size_t>(N * K / x_div * cols), 22);
      std::vector<float> want(static_cast<size_t>(N * K * rows));
      ASSERT_TRUE(
          host.matmul_id(t, w.data(), eb, rows, cols, rb, x.data(), x_div, ids.data(), N * K, want.data(), nullptr).ok());
      auto dw = put(w), dx = put(x);
      for (bool sorted : {false, true}) {  // launched in pair order, and grouped by expert (moe_sort)
        auto dy = DeviceBuffer::allocate(want.size() * 4), dorder = DeviceBuffer::allocate(ids.size() * 4);
        ASSERT_TRUE(dy.ok() && dorder.ok());
        if (sorted) {
          ASSERT_TRUE(moe_sort(static_cast<const int32_t*>(dids.get()), N * K, X, static_cast<int32_t*>(dorder->get())).ok());
        }
        ASSERT_TRUE(gemm_id(t, dw.get(), eb, rows, cols, rb, static_cast<const float*>(dx.get()), x_div,
                            static_cast<const int32_t*>(dids.get()), N * K, static_cast<float*>(dy->get()),
                            sorted ? static_cast<const int32_t*>(dorder->get()) : nullptr)
                        .ok());
        const auto got = get<float>(*dy, want.size());
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i])))
              << dtype_name(t) << " x_div " << x_div << " sorted " << sorted << " " << i;
      }
    }
  }
  {  // moe_sort: a permutation of the pairs with ascending experts (any order within one)
    auto dorder = DeviceBuffer::allocate(ids.size() * 4);
    ASSERT_TRUE(dorder.ok());
    ASSERT_TRUE(moe_sort(static_cast<const int32_t*>(dids.get()), N * K, X, static_cast<int32_t*>(dorder->get())).ok());
    const auto order = get<int32_t>(*dorder, ids.size());
    std::vector<int32_t> want_order(ids.size());
    ASSERT_TRUE(host.moe_sort(ids.data(), N * K, X, want_order.data()).ok());
    EXPECT_TRUE(std::is_permutation(order.begin(), order.end(), want_order.begin()));
    for (size_t i = 1; i < order.size(); ++i) EXPECT_LE(ids[order[i - 1]], ids[order[i]]) << i;
  }
  const auto logits = randn(static_cast<size_t>(N * X), 23);
  auto dl = put(logits);
  // modes: softmax, renormalized, gpt-oss's softmax over the top k; DeepSeek-V3's sigmoid with a
  // selection bias, renormalized and scaled (glm4moe), the same in 4 groups of 2 with 2 eligible
  // (deepseek2), softmax with a selection bias (ernie4_5-moe)
  const auto sel = randn(static_cast<size_t>(X), 31);
  auto dsel = put(sel);
  for (int mode = 0; mode < 6; ++mode) {
    GpuMoeRouteArgs a;
    a.logits = logits.data(), a.n_tokens = N, a.n_expert = X, a.k = K, a.norm = mode == 1 || mode >= 3,
    a.softmax_topk = mode == 2;
    a.sigmoid = mode == 3 || mode == 4;
    a.bias = mode >= 3 ? sel.data() : nullptr;
    a.scale = mode == 3 ? 2.5f : 1.0f;
    if (mode == 4) a.groups = 4, a.groups_used = 2;
    std::vector<int32_t> want_ids(static_cast<size_t>(N * K));
    std::vector<float> want_w(want_ids.size());
    a.ids = want_ids.data(), a.weights = want_w.data();
    ASSERT_TRUE(host.moe_route(a).ok());
    auto di = DeviceBuffer::allocate(want_ids.size() * 4), dwt = DeviceBuffer::allocate(want_w.size() * 4);
    ASSERT_TRUE(di.ok() && dwt.ok());
    a.logits = static_cast<const float*>(dl.get()), a.ids = static_cast<int32_t*>(di->get());
    a.weights = static_cast<float*>(dwt->get());
    if (a.bias) a.bias = static_cast<const float*>(dsel.get());
    ASSERT_TRUE(moe_route(a).ok());
    EXPECT_EQ(get<int32_t>(*di, want_ids.size()), want_ids) << "mode " << mode;
    const auto got_w = get<float>(*dwt, want_w.size());
    for (size_t i = 0; i < want_w.size(); ++i) EXPECT_NEAR(got_w[i], want_w[i], 1e-6f) << "mode " << mode << " " << i;
  }
  // gpt-oss's per-pair expert biases and clamped SwiGLU (values past the clamps included)
  {
    const int64_t F = 40;
    const auto b = randn(static_cast<size_t>(X * F), 28);
    auto g = randn(static_cast<size_t>(N * K * F), 29), u = randn(g.size(), 30);
    for (auto& v : g) v *= 6.0f;
    for (auto& v : u) v *= 6.0f;
    auto dg = put(g), du = put(u), db = put(b);
    ASSERT_TRUE(add_rows_id(static_cast<float*>(dg.get()), static_cast<const float*>(db.get()),
                            static_cast<const int32_t*>(dids.get()), N * K, F)
                    .ok());
    ASSERT_TRUE(swiglu_oai(static_cast<float*>(dg.get()), static_cast<const float*>(du.get()), N * K * F).ok());
    ASSERT_TRUE(host.add_rows_id(g.data(), b.data(), ids.data(), N * K, F).ok());
    ASSERT_TRUE(host.swiglu_oai(g.data(), u.data(), N * K * F).ok());
    const auto got = get<float>(dg, g.size());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(got[i], g[i], 1e-5f * (1.0f + std::fabs(g[i]))) << i;
  }
  const int64_t n = 300;
  const auto yp = randn(static_cast<size_t>(N * K * n), 24), wts = randn(static_cast<size_t>(N * K), 25),
             sh = randn(static_cast<size_t>(N * n), 26), sg = randn(static_cast<size_t>(N), 27);
  for (int mode = 0; mode < 3; ++mode) {  // no shared expert; qwen2moe's gated one; an ungated one (glm4moe)
    const bool shared = mode > 0, gated = mode == 1;
    std::vector<float> want(static_cast<size_t>(N * n));
    ASSERT_TRUE(host.moe_combine(want.data(), yp.data(), wts.data(), N, K, n, shared ? sh.data() : nullptr,
                                 gated ? sg.data() : nullptr)
                    .ok());
    auto dyp = put(yp), dwts = put(wts), dsh = put(sh), dsg = put(sg);
    auto dy = DeviceBuffer::allocate(want.size() * 4);
    ASSERT_TRUE(dy.ok());
    ASSERT_TRUE(moe_combine(static_cast<float*>(dy->get()), static_cast<const float*>(dyp.get()),
                            static_cast<const float*>(dwts.get()), N, K, n,
                            shared ? static_cast<const float*>(dsh.get()) : nullptr,
                            gated ? static_cast<const float*>(dsg.get()) : nullptr)
                    .ok());
    const auto got = get<float>(*dy, want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << i;
  }
}

// Embedding rows on the device against the CPU's get_row (then the scale, as the forward's gemma
// scaling): every type the GPU forward reads, rows picked out of order and twice, scale 1 and 2.5.
TEST(GpuKernels, GetRowsIsTheCpuGetRow) {
  std::string why;
  if (skip_without_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t rows = 10;
  const std::vector<int32_t> ids = {3, 0, 9, 3, 7};
  const auto n = static_cast<int64_t>(ids.size());
  for (DType t : device_weight_types()) {
    const int64_t cols = t == DType::F32 || t == DType::F16 || t == DType::BF16 ? 200 : 512;
    const auto wf = randn(static_cast<size_t>(rows * cols), 41);
    const size_t rb = *dtype_row_bytes(t, static_cast<uint64_t>(cols));
    std::vector<uint8_t> w(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_test_row(t, wf.data() + r * cols, w.data() + r * rb, cols);
    for (float scale : {1.0f, 2.5f}) {
      std::vector<float> want(static_cast<size_t>(n * cols));
      for (int64_t i = 0; i < n; ++i) {
        dequantize_row(t, w.data() + static_cast<size_t>(ids[static_cast<size_t>(i)]) * rb, want.data() + i * cols, cols);
        for (int64_t j = 0; j < cols; ++j) want[static_cast<size_t>(i * cols + j)] *= scale;
      }
      auto dw = put(w), dids = put(ids);
      auto dout = DeviceBuffer::allocate(want.size() * 4);
      ASSERT_TRUE(dout.ok());
      ASSERT_TRUE(get_rows(t, dw.get(), rb, cols, static_cast<const int32_t*>(dids.get()), n, static_cast<float*>(dout->get()),
                           scale)
                      .ok());
      const auto got = get<float>(*dout, want.size());
      for (size_t i = 0; i < want.size(); ++i)  // (the device may fuse d * s * q - dmin * m: an ulp or two)
        ASSERT_NEAR(got[i], want[i], 1e-6f * (1.0f + std::fabs(want[i]))) << dtype_name(t) << " scale " << scale << " " << i;
    }
  }
  EXPECT_FALSE(get_rows_supports(DType::Q8_K));  // (an activation type, in no model file)
  EXPECT_FALSE(get_rows(DType::Q8_K, nullptr, 0, 256, nullptr, 1, nullptr, 1.0f).ok());
}

// The tensor-core product against the CPU oracle, within the rounding of the activations to F16 /
// BF16 (and of dequantized weights to F16). Two shapes: 100 tokens (CTAs of 32 tokens; six whole
// 16-token tiles and a partial one), 48 rows (part of one 128-row CTA), 512 columns; and 300 tokens
// (CTAs of 64, the last one partial), 272 rows (two whole 128-row CTAs and part of a third), columns
// that are not whole 32-column steps where the type allows it (208 for F16/BF16). Each with a roomy
// workspace (one chunk), with one that forces chunks (quantized: 32 tokens and 32 + 16 rows; half
// weights: 64 + 36 tokens), and with too small a one (gemm instead). The other block types (their
// decoding is RunDecoder's, which the GEMV and get_rows tests check element by element) the first
// shape with the roomy workspace: their dequantization into the product's chunks.
TEST(GpuKernels, TensorCoreGemmMatchesTheCpuOracle) {
  std::string why;
  if (skip_without_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  for (DType t : device_weight_types()) {
    if (t == DType::F32) continue;  // (not on tensor cores)
    const bool quantized = t != DType::F16 && t != DType::BF16;
    const bool k_quant = test_block(t) == 256;
    // (the sanitized build, where this test took 115 s and then, with three types, 159 s of CI: the
    // edge shapes and workspaces for one K-quant type, the first shape for every type; the release
    // build takes them for seven)
    const bool every_case = test::sanitized_build()
                                ? t == DType::Q4_K
                                : t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::Q4_0 ||
                                      t == DType::Q4_K || t == DType::Q6_K || t == DType::IQ2_XXS;
    struct Shape {
      int64_t rows, cols, n;
    };
    for (const Shape sh : {Shape{48, 512, 100}, Shape{272, k_quant ? 256 : quantized ? 224 : 208, 300}}) {
      if (!every_case && sh.n != 100) continue;
      const int64_t rows = sh.rows, cols = sh.cols, n = sh.n;
      const auto wf = randn(static_cast<size_t>(rows * cols), 31), x = randn(static_cast<size_t>(n * cols), 32);
      const size_t rb = *dtype_row_bytes(t, static_cast<uint64_t>(cols));
      ASSERT_TRUE(gemm_tc_supports(t, rows, cols, rb)) << dtype_name(t);
      std::vector<uint8_t> w(rb * rows);
      for (int64_t r = 0; r < rows; ++r) quantize_test_row(t, wf.data() + r * cols, w.data() + r * rb, cols);
      std::vector<float> want(static_cast<size_t>(n * rows));
      matmul_reference(Matrix{t, rows, cols, w.data(), rb, "w"}, x.data(), cols, want.data(), rows, n);
      // a product of cols N(0,1) pairs is ~N(0, cols); rounding x to BF16 (8 bits) or F16 (11 bits)
      const float tol = (t == DType::BF16 ? 0.02f : 0.004f) * std::sqrt(static_cast<float>(cols));
      for (size_t ws : {size_t{8} << 20, quantized ? size_t{2} * 32 * cols * 2 : size_t{64} * cols * 2, size_t{64}}) {
        if (!every_case && ws != size_t{8} << 20) continue;
        auto dw = put(w), dx = put(x);
        auto dy = DeviceBuffer::allocate(want.size() * 4), dws = DeviceBuffer::allocate(ws);
        ASSERT_TRUE(dy.ok() && dws.ok());
        ASSERT_TRUE(gemm_tc(t, dw.get(), rows, cols, rb, static_cast<const float*>(dx.get()), n,
                            static_cast<float*>(dy->get()), dws->get(), ws)
                        .ok());
        const auto got = get<float>(*dy, want.size());
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], tol) << dtype_name(t) << " " << rows << "x" << cols << " workspace " << ws
                                            << " token " << i / rows << " row " << i % rows;
      }
    }
  }
  EXPECT_FALSE(gemm_tc_supports(DType::F32, 48, 512, 2048));
  EXPECT_FALSE(gemm_tc_supports(DType::F16, 40, 512, 1024));  // rows not whole tiles
}

// Greedy sampling on the device: each row's first maximum, as the CPU's argmax -- ties (the first
// wins), NaNs skipped, a row of -inf, rows longer and shorter than the CTA.
TEST(GpuKernels, ArgmaxRowsIsTheCpuArgmax) {
  std::string why;
  if (skip_without_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  for (int64_t n : {int64_t{7}, int64_t{1000}, int64_t{151936}}) {
    const int64_t rows = 5;
    auto x = randn(static_cast<size_t>(rows * n), 41);
    x[static_cast<size_t>(n - 1)] = 50.0f, x[static_cast<size_t>(n / 2)] = 50.0f;  // row 0: a tie, the first wins
    x[static_cast<size_t>(n + 1)] = std::nanf("");                                 // row 1: a NaN
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(2 * n + i)] = -INFINITY;  // row 2: all -inf
    auto dx = put(x);
    auto dout = DeviceBuffer::allocate(static_cast<size_t>(rows) * 4);
    ASSERT_TRUE(dout.ok());
    ASSERT_TRUE(argmax_rows(static_cast<const float*>(dx.get()), rows, n, static_cast<int32_t*>(dout->get())).ok());
    const auto got = get<int32_t>(*dout, static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_EQ(got[static_cast<size_t>(r)], tmill::argmax(x.data() + r * n, n)) << "n " << n << " row " << r;
  }
}

}  // namespace
}  // namespace tmill::gpu
