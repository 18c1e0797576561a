#include "model/mla.h"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace tmill {

void PreparedMla::collect(const LayerWeights& L, std::vector<std::pair<const Matrix*, PreparedMatrix*>>& jobs) {
  if (L.wq_a.valid()) jobs.emplace_back(&L.wq_a, &q_a);
  jobs.emplace_back(&L.wq, &q);
  jobs.emplace_back(&L.wkv_a, &kv_a);
  k_b.resize(L.wk_b.size());
  v_b.resize(L.wv_b.size());
  for (size_t h = 0; h < L.wk_b.size(); ++h) jobs.emplace_back(&L.wk_b[h], &k_b[h]);
  for (size_t h = 0; h < L.wv_b.size(); ++h) jobs.emplace_back(&L.wv_b[h], &v_b[h]);
}

uint64_t PreparedMla::bytes() const {
  auto prepared = [](const PreparedMatrix& p) { return p.own_bytes() ? p.own_bytes() : p.source().bytes(); };
  uint64_t b = prepared(q_a) + prepared(q) + prepared(kv_a);
  for (const auto* v : {&k_b, &v_b})
    for (const PreparedMatrix& m : *v) b += prepared(m);
  return b;
}

namespace {
// fn(h) for every head, the heads split over the pool (each head's product on one thread: the
// per-head matrices are small, and one fork per layer costs less than one per head)
template <class Fn>
void per_head(int64_t n_head, ThreadPool* pool, Fn&& fn) {
  if (pool && pool->size() > 1) {
    pool->parallel_for(n_head, 1, [&](int64_t h0, int64_t h1, int) {
      for (int64_t h = h0; h < h1; ++h) fn(h);
    });
  } else {
    for (int64_t h = 0; h < n_head; ++h) fn(h);
  }
}
}  // namespace

void MlaAttention::project(const ModelConfig& c, const LayerWeights& L, const PreparedMla& w, const float* x,
                           int64_t ldx, int64_t n, const float* cos, const float* sin, float* q, float* kv,
                           ThreadPool* pool) {
  const int64_t R = c.mla_kv_rank, HD = c.head_dim, QH = c.mla_nope + c.n_rot, QP = c.q_proj_dim(), H = c.n_head;
  const int64_t KA = R + c.n_rot, half = c.n_rot / 2;
  qp_.resize(static_cast<size_t>(n * QP));
  kva_.resize(static_cast<size_t>(n * KA));
  if (w.q_a.rows() > 0) {  // the low-rank q: attn_q_a, its norm, attn_q_b
    const int64_t QR = c.mla_q_rank;
    qa_.resize(static_cast<size_t>(n * QR));
    const MatmulOutput a[] = {{&w.q_a, qa_.data(), QR}, {&w.kv_a, kva_.data(), KA}};
    matmul_many(a, 2, x, ldx, n, pool);
    rmsnorm_rows(qa_.data(), QR, L.q_a_norm.data(), qa_.data(), QR, n, QR, c.rms_eps);
    matmul(w.q, qa_.data(), QR, qp_.data(), QP, n, pool);
  } else {
    const MatmulOutput a[] = {{&w.q, qp_.data(), QP}, {&w.kv_a, kva_.data(), KA}};
    matmul_many(a, 2, x, ldx, n, pool);
  }
  // K = V: [rmsnorm(latent) | RoPE(k_pe)]; each query head's RoPE part after its latent slot
  for (int64_t t = 0; t < n; ++t) {
    const float* src = kva_.data() + t * KA;
    float* k = kv + t * HD;
    rmsnorm_rows(src, R, L.kv_a_norm.data(), k, R, 1, R, c.rms_eps);
    std::memcpy(k + R, src + R, static_cast<size_t>(c.n_rot) * sizeof(float));
    float* qt = q + t * H * HD;
    for (int64_t h = 0; h < H; ++h)
      std::memcpy(qt + h * HD + R, qp_.data() + t * QP + h * QH + c.mla_nope, static_cast<size_t>(c.n_rot) * sizeof(float));
    if (cos) {
      rope_heads_cs(k + R, 1, HD, c.n_rot, cos + t * half, sin + t * half, false);
      rope_heads_cs(qt + R, H, HD, c.n_rot, cos + t * half, sin + t * half, false);
    }
  }
  // the absorption: head h's latent query = attn_k_b_h x q_nope_h
  per_head(H, pool, [&](int64_t h) { matmul(w.k_b[h], qp_.data() + h * QH, QP, q + h * HD, H * HD, n, nullptr); });
}

void MlaAttention::output(const ModelConfig& c, const PreparedMla& w, const float* att, int64_t n, float* out,
                          ThreadPool* pool) {
  const int64_t HD = c.head_dim, H = c.n_head, V = c.mla_v;
  per_head(H, pool, [&](int64_t h) { matmul(w.v_b[h], att + h * HD, H * HD, out + h * V, H * V, n, nullptr); });
}

}  // namespace tmill
