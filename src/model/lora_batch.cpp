#include "model/lora_batch.h"

#include <algorithm>
#include <cstring>

#include "core/log.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace tmill {

void LoraBatch::begin(const ForwardBatch& batch) {
  groups_.clear();
  if (batch.loras.empty()) return;
  groups_.resize(batch.loras.size());
  for (size_t i = 0; i < batch.loras.size(); ++i) groups_[i].binding = batch.loras[i];
  binding_of_token_.assign(batch.tokens.size(), -1);
  for (const SeqSlice& s : batch.seqs) {
    if (s.lora < 0) continue;
    TM_ASSERT(static_cast<size_t>(s.lora) < batch.loras.size() && batch.loras[s.lora].adapter, "bad LoRA binding");
    for (int32_t i = 0; i < s.n_tokens; ++i) {
      groups_[static_cast<size_t>(s.lora)].rows.push_back(s.token_begin + i);
      binding_of_token_[static_cast<size_t>(s.token_begin + i)] = s.lora;
    }
  }
  // Bindings no sequence uses cost nothing; none used at all leaves the batch inactive.
  std::erase_if(groups_, [](const Group& g) { return g.rows.empty(); });
}

bool LoraBatch::touches(int64_t l, LoraSlot s) const {
  for (const Group& g : groups_)
    if (g.binding.adapter->touches(l, s)) return true;
  return false;
}

void LoraBatch::apply_weight(const LoraWeight& w, float scale, const std::vector<int64_t>& rows, const float* x,
                             int64_t ldx, float* y, int64_t ldy, ThreadPool* pool) {
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t cols = w.a.cols, rank = w.rank(), out = w.b.rows;
  const float s = scale * w.factor;
  // A few rows (decode) are a few microseconds of work, less than a fork/join on the pool costs.
  if (n <= kSerialRows) pool = nullptr;
  xs_.resize(static_cast<size_t>(n * cols));
  t_.resize(static_cast<size_t>(n * rank));
  for (int64_t i = 0; i < n; ++i) std::memcpy(xs_.data() + i * cols, x + rows[i] * ldx, cols * sizeof(float));
  matmul(w.pa, xs_.data(), cols, t_.data(), rank, n, pool);  // t = A x: rank dot products per row
  // y += sum_k (s t_k) B^T[k]: rank contiguous axpys per row (B's rows are only rank wide, too short
  // for dot products to pay), rows split over the pool.
  auto rows_fn = [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      float* yr = y + rows[static_cast<size_t>(i)] * ldy;
      for (int64_t k = 0; k < rank; ++k) {
        axpy(yr, w.bt.data() + k * out, s * t_[static_cast<size_t>(i * rank + k)], out);
      }
    }
  };
  if (pool) pool->parallel_for(n, 4, rows_fn);
  else rows_fn(0, n, 0);
}

void LoraBatch::apply(int64_t l, LoraSlot s, const float* x, int64_t ldx, float* y, int64_t ldy, ThreadPool* pool) {
  for (const Group& g : groups_)
    if (const LoraWeight* w = g.binding.adapter->layer(l, s)) apply_weight(*w, g.binding.scale, g.rows, x, ldx, y, ldy, pool);
}

void LoraBatch::apply_output(const std::vector<int64_t>& token_of_row, const float* x, int64_t ldx, float* y,
                             int64_t ldy, ThreadPool* pool) {
  std::vector<int64_t> rows;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const LoraWeight* w = groups_[gi].binding.adapter->output();
    if (!w) continue;
    rows.clear();
    const int32_t binding = binding_of_token_[static_cast<size_t>(groups_[gi].rows.front())];
    for (size_t r = 0; r < token_of_row.size(); ++r)
      if (binding_of_token_[static_cast<size_t>(token_of_row[r])] == binding) rows.push_back(static_cast<int64_t>(r));
    if (!rows.empty()) apply_weight(*w, groups_[gi].binding.scale, rows, x, ldx, y, ldy, pool);
  }
}

void LoraBatch::apply_embedding(const ForwardBatch& batch, float* x, int64_t ldx) {
  for (const Group& g : groups_) {
    const LoraWeight* w = g.binding.adapter->embedding();
    if (!w) continue;
    const float s = g.binding.scale * w->factor;
    const int64_t rank = w->rank(), E = w->b.rows;
    for (int64_t t : g.rows) {
      const auto* a = reinterpret_cast<const float*>(w->a.row(batch.tokens[static_cast<size_t>(t)]));
      float* xr = x + t * ldx;
      for (int64_t e = 0; e < E; ++e) {
        const auto* b = reinterpret_cast<const float*>(w->b.row(e));
        float v = 0.0f;
        for (int64_t k = 0; k < rank; ++k) v += b[k] * a[k];
        xr[e] += s * v;
      }
    }
  }
}

}  // namespace tmill
