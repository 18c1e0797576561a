// deepseek2's multi-head latent attention as a layer helper of the batched forward, absorbed as
// llama.cpp runs it (ModelConfig::is_mla): the K/V cache holds one head per token, the normed latent
// (mla_kv_rank) followed by the RoPE part k_pe (n_rot), and V is that same row; each query head is
// [attn_k_b_h x q_nope_h | RoPE(q_pe_h)], so the paged attention kernels run it as multi-query
// attention of head_dim = mla_kv_rank + n_rot; each head's output's latent part goes through
// attn_v_b_h before attn_output. Tested against ReferenceForward, and the reference against a float64
// oracle that decompresses K and V per head instead (tests/unit/model/f64_forward.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/matmul.h"
#include "model/config.h"
#include "model/model.h"

namespace tmill {

class ThreadPool;

// One layer's MLA weights prepared for the kernels.
struct PreparedMla {
  PreparedMatrix q_a, q, kv_a;             // q_a empty without a low-rank q (mla_q_rank 0)
  std::vector<PreparedMatrix> k_b, v_b;    // per head
  void collect(const LayerWeights& L, std::vector<std::pair<const Matrix*, PreparedMatrix*>>& jobs);
  uint64_t bytes() const;
};

class MlaAttention {
 public:
  // From x (n rows of n_embd, stride ldx): q (n rows of n_head x head_dim) and kv (n rows of
  // head_dim), RoPE applied with each token's cos/sin (n_rot / 2 values per token, consecutive).
  void project(const ModelConfig& c, const LayerWeights& L, const PreparedMla& w, const float* x, int64_t ldx,
               int64_t n, const float* cos, const float* sin, float* q, float* kv, ThreadPool* pool);
  // out (n rows of attn_out_dim) = per head attn_v_b_h x the first mla_kv_rank values of the head's
  // attention output (att: n rows of n_head x head_dim).
  void output(const ModelConfig& c, const PreparedMla& w, const float* att, int64_t n, float* out, ThreadPool* pool);

 private:
  std::vector<float> qa_, qp_, kva_;
};

}  // namespace tmill
