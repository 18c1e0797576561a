// Paged attention with a sliding window (attend to [start, n_ctx)) and attention sinks (one extra
// logit per query head in the softmax denominator, gpt-oss): the scalar oracle against a float64
// softmax over the stored values, every SIMD kernel against the oracle, for window starts inside,
// at and across block boundaries and sinks far below, near and far above the scores.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "kernels/attention.h"
#include "paged_cache.h"

using namespace tmill;
using tmill::test::PagedCache;
using tmill::test::make_paged_cache;
using tmill::test::naive_attention;

TEST(AttentionWindow, WindowAndSinksMatchTheOracleOnEveryIsa) {
  std::mt19937 rng(19);
  struct Shape {
    int64_t hd, group, n_head_kv, bs;
  };
  const Shape shapes[] = {{64, 8, 2, 16}, {16, 3, 1, 16}, {40, 5, 2, 16}, {32, 2, 2, 4}, {32, 24, 1, 16}};  // (24: two chunks of query heads)
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::Q4_0}) {  // Q4_0: the dequantizing path
    for (const Shape& sh : shapes) {
      const int64_t n_ctx = 70;
      PagedCache c = make_paged_cache(t, sh.n_head_kv, sh.hd, sh.bs, n_ctx, rng);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> q(static_cast<size_t>(sh.group * sh.hd));
      for (auto& x : q) x = nd(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(sh.hd));
      const int64_t head = sh.n_head_kv - 1;
      // sinks: ordinary, one far above every score (the exp-overflow path), one far below
      std::vector<float> sinks(static_cast<size_t>(sh.group));
      for (size_t g = 0; g < sinks.size(); ++g) sinks[g] = g == 0 ? 95.0f : g == 1 ? -90.0f : nd(rng);
      for (int64_t start : {0, 1, 15, 16, 17, 33, 54, 69}) {
        for (const float* sk : {static_cast<const float*>(nullptr), static_cast<const float*>(sinks.data())}) {
          const AttnMask x{.begin = start, .sinks = sk};
          std::vector<float> want(q.size()), got(q.size());
          paged_attention_group_reference(q.data(), sh.group, head, c.view, c.table.data(), n_ctx, scale, want.data(), x);
          const auto exact = naive_attention(c, q.data(), sh.group, head, n_ctx, scale, x);
          for (size_t i = 0; i < q.size(); ++i)
            ASSERT_NEAR(want[i], exact[i], 1e-4 * (1 + std::abs(exact[i])))
                << dtype_name(t) << " start " << start << " sinks " << (sk != nullptr) << " i " << i;
          for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
            if (isa > detected_isa()) continue;
            set_isa_limit(isa);
            paged_attention_group(q.data(), sh.group, head, c.view, c.table.data(), n_ctx, scale, got.data(), x);
            for (size_t i = 0; i < q.size(); ++i)
              ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::abs(want[i])))
                  << dtype_name(t) << " isa " << isa_name(isa) << " hd " << sh.hd << " start " << start << " sinks "
                  << (sk != nullptr) << " i " << i;
          }
          set_isa_limit(detected_isa());
        }
      }
    }
  }
}

// A window is not a no-op: with the window the output is the softmax over the window only (the keys
// before it may hold anything), and a sink far above the scores scales the output toward zero.
TEST(AttentionWindow, KeysBeforeTheWindowAndHugeSinksBehave) {
  std::mt19937 rng(5);
  const int64_t hd = 32, group = 2, n_ctx = 40, start = 21;
  PagedCache c = make_paged_cache(DType::F32, 1, hd, 16, n_ctx, rng);
  std::vector<float> q(static_cast<size_t>(group * hd), 0.3f);
  std::vector<float> a(q.size()), b(q.size());
  AttnMask x{.begin = start};
  paged_attention_group(q.data(), group, 0, c.view, c.table.data(), n_ctx, 0.2f, a.data(), x);
  // overwrite every key and value before the window with huge values: nothing changes
  std::vector<float> big(hd, 1e3f);
  for (int64_t p = 0; p < start; ++p) paged_kv_store(c.view, c.table.data(), p, big.data(), big.data());
  paged_attention_group(q.data(), group, 0, c.view, c.table.data(), n_ctx, 0.2f, b.data(), x);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
  const float sinks[group] = {60.0f, 60.0f};
  x.sinks = sinks;
  paged_attention_group(q.data(), group, 0, c.view, c.table.data(), n_ctx, 0.2f, b.data(), x);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_LT(std::abs(b[i]), 1e-6f * (1 + std::abs(a[i]))) << i;
}
