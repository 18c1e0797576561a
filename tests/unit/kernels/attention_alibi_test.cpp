// ALiBi in the paged attention kernels (bloom, mpt, baichuan 13B): a key j positions before the query
// scores slope_h * -j more. The scalar oracle against a float64 softmax, every SIMD kernel (one KV head
// and runs of adjacent heads) against the oracle, over every KV type, with and without a sliding
// window, at contexts ending inside and at block boundaries. (set_alibi's slopes: classic_families_test.cpp.)
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

TEST(AttentionAlibi, SlopesMatchTheOracleOnEveryIsaAndKvType) {
  std::mt19937 rng(23);
  struct Shape {
    int64_t hd, group, n_head_kv;
  };
  const Shape shapes[] = {{64, 1, 4}, {16, 3, 2}, {40, 4, 2}, {32, 24, 1}};  // (24: two chunks of query heads)
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::Q4_0, DType::F8_E4M3}) {
    for (const Shape& sh : shapes) {
      for (int64_t n_ctx : {1, 16, 37, 70}) {
        PagedCache c = make_paged_cache(t, sh.n_head_kv, sh.hd, 16, n_ctx, rng);
        const int64_t H = sh.group * sh.n_head_kv;
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> q(static_cast<size_t>(H * sh.hd));
        for (auto& x : q) x = nd(rng);
        // bloom's slopes span 2^-1 .. 2^-8; one steep head (a few keys matter) and one flat
        std::vector<float> slopes(static_cast<size_t>(H));
        for (int64_t h = 0; h < H; ++h) slopes[h] = h == 0 ? 2.0f : h == 1 ? 1e-4f : std::pow(0.5f, float(h % 8 + 1));
        const float scale = 1.0f / std::sqrt(static_cast<float>(sh.hd));
        for (int64_t start : {int64_t{0}, n_ctx / 2}) {
          std::vector<float> want(q.size()), got(q.size());
          for (int64_t head = 0; head < sh.n_head_kv; ++head) {
            const int64_t o = head * sh.group * sh.hd;
            const AttnMask x{.begin = start, .alibi = slopes.data() + head * sh.group};
            paged_attention_group_reference(q.data() + o, sh.group, head, c.view, c.table.data(), n_ctx, scale,
                                            want.data() + o, x);
            const auto exact = naive_attention(c, q.data() + o, sh.group, head, n_ctx, scale, x);
            for (int64_t i = 0; i < sh.group * sh.hd; ++i)
              ASSERT_NEAR(want[o + i], exact[i], 1e-4 * (1 + std::abs(exact[i])))
                  << dtype_name(t) << " n_ctx " << n_ctx << " start " << start << " head " << head << " i " << i;
          }
          for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
            if (isa > detected_isa()) continue;
            set_isa_limit(isa);
            for (int64_t head = 0; head < sh.n_head_kv; ++head) {  // one KV head per call
              const int64_t o = head * sh.group * sh.hd;
              const AttnMask x{.begin = start, .alibi = slopes.data() + head * sh.group};
              paged_attention_group(q.data() + o, sh.group, head, c.view, c.table.data(), n_ctx, scale, got.data() + o, x);
            }
            for (size_t i = 0; i < q.size(); ++i)
              ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::abs(want[i])))
                  << dtype_name(t) << " isa " << isa_name(isa) << " hd " << sh.hd << " n_ctx " << n_ctx << " i " << i;
            // every KV head in one call (the forward's runs): each head's slopes from its own offset
            std::fill(got.begin(), got.end(), 0.0f);
            const AttnMask all{.begin = start, .alibi = slopes.data()};
            paged_attention_heads(q.data(), sh.group, 0, sh.n_head_kv, c.view, c.table.data(), n_ctx, scale, got.data(), all);
            for (size_t i = 0; i < q.size(); ++i)
              ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::abs(want[i])))
                  << dtype_name(t) << " isa " << isa_name(isa) << " heads run, n_ctx " << n_ctx << " i " << i;
          }
          set_isa_limit(detected_isa());
        }
      }
    }
  }
}

// The bias is not a no-op: a steep slope makes the newest key's value the output.
TEST(AttentionAlibi, ASteepSlopeAttendsToTheNewestKey) {
  std::mt19937 rng(5);
  const int64_t hd = 32, n_ctx = 45;
  PagedCache c = make_paged_cache(DType::F32, 1, hd, 16, n_ctx, rng);
  std::vector<float> q(hd, 0.01f), out(hd), k(hd), v(hd), plain(hd);
  const float steep = 50.0f;
  paged_attention_group(q.data(), 1, 0, c.view, c.table.data(), n_ctx, 0.1f, out.data(), AttnMask{.alibi = &steep});
  paged_attention_group(q.data(), 1, 0, c.view, c.table.data(), n_ctx, 0.1f, plain.data(), AttnMask{});
  paged_kv_load(c.view, c.table.data(), n_ctx - 1, 0, k.data(), v.data());
  double moved = 0;
  for (int64_t i = 0; i < hd; ++i) {
    EXPECT_NEAR(out[i], v[i], 1e-5) << i;
    moved += std::abs(out[i] - plain[i]);
  }
  EXPECT_GT(moved, 0.5);
}
