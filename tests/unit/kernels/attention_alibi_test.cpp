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

using namespace tmill;

namespace {

struct Cache {
  PagedKvView view;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> table;
};

Cache make_cache(DType t, int64_t n_head_kv, int64_t hd, int64_t n_ctx, std::mt19937& rng) {
  Cache c;
  const int64_t bs = 16, blocks = (n_ctx + bs - 1) / bs, pool = blocks * 2 + 3;
  const size_t tb = kv_tile_bytes(t, hd, bs);
  c.k.assign(static_cast<size_t>(pool * n_head_kv) * tb, 0);
  c.v.assign(c.k.size(), 0);
  c.view = {c.k.data(), c.v.data(), t, n_head_kv, bs, hd};
  for (int64_t b = 0; b < blocks; ++b) c.table.push_back(static_cast<int32_t>((b * 5 + 2) % pool));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(n_head_kv * hd)), v(k.size());
  for (int64_t p = 0; p < n_ctx; ++p) {
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    paged_kv_store(c.view, c.table.data(), p, k.data(), v.data());
  }
  return c;
}

// softmax over [start, n_ctx) of q.k * scale + slope * (p - (n_ctx - 1)), in double, for `group`
// query heads of KV head `head`.
std::vector<double> naive(const Cache& c, const float* q, int64_t group, int64_t head, int64_t start, int64_t n_ctx,
                          float scale, const float* slopes) {
  const int64_t hd = c.view.head_dim;
  std::vector<double> out(static_cast<size_t>(group * hd), 0.0);
  std::vector<float> k(hd), v(hd);
  for (int64_t g = 0; g < group; ++g) {
    std::vector<double> s(n_ctx, 0.0);
    double mx = -1e300;
    for (int64_t p = start; p < n_ctx; ++p) {
      paged_kv_load(c.view, c.table.data(), p, head, k.data(), v.data());
      double d = 0;
      for (int64_t i = 0; i < hd; ++i) d += double(q[g * hd + i]) * k[i];
      s[p] = d * scale + double(slopes[g]) * double(p - (n_ctx - 1));
      mx = std::max(mx, s[p]);
    }
    double sum = 0;
    for (int64_t p = start; p < n_ctx; ++p) sum += (s[p] = std::exp(s[p] - mx));
    for (int64_t p = start; p < n_ctx; ++p) {
      paged_kv_load(c.view, c.table.data(), p, head, k.data(), v.data());
      for (int64_t i = 0; i < hd; ++i) out[g * hd + i] += s[p] / sum * v[i];
    }
  }
  return out;
}

}  // namespace

TEST(AttentionAlibi, SlopesMatchTheOracleOnEveryIsaAndKvType) {
  std::mt19937 rng(23);
  struct Shape {
    int64_t hd, group, n_head_kv;
  };
  const Shape shapes[] = {{64, 1, 4}, {16, 3, 2}, {40, 4, 2}, {32, 24, 1}};  // (24: two chunks of query heads)
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::Q4_0, DType::F8_E4M3}) {
    for (const Shape& sh : shapes) {
      for (int64_t n_ctx : {1, 16, 37, 70}) {
        Cache c = make_cache(t, sh.n_head_kv, sh.hd, n_ctx, rng);
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
            const auto exact = naive(c, q.data() + o, sh.group, head, start, n_ctx, scale, x.alibi);
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
  Cache c = make_cache(DType::F32, 1, hd, n_ctx, rng);
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
