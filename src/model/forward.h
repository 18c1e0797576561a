// The batched forward pass: one call per engine step over a flattened batch that mixes prefill
// chunks and decode tokens. Matrix products run over all tokens of the step at once; attention runs
// per sequence through its block table. Tested against ReferenceForward.
#pragma once

#include <memory>
#include <vector>

#include "kernels/matmul.h"
#include "model/batch.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace tmill {

class ThreadPool;

class Forward {
 public:
  // Prepares every weight (one-time repacking) and the RoPE tables. pool may be null (1 thread).
  Forward(std::shared_ptr<const Model> model, ThreadPool* pool);

  // Computes the batch, writing its K/V into `kv` at the slots its block tables give, and returns
  // logits rows (n_vocab floats each) in seq order: one per Last seq, n_tokens per All seq.
  void run(const ForwardBatch& batch, KvStorage& kv, std::vector<float>& logits);

  const Model& model() const { return *model_; }

 private:
  struct PreparedLayer {
    PreparedMatrix wq, wk, wv, wo, gate, up, down;
  };
  void ensure_scratch(int64_t n_tokens);
  void attention(const ForwardBatch& batch, const KvStorage& kv, int64_t layer);

  std::shared_ptr<const Model> model_;
  ThreadPool* pool_;
  std::vector<PreparedLayer> layers_;
  PreparedMatrix output_;
  std::vector<float> inv_freq_;  // (n_rot/2)
  float pos_scale_ = 1.0f;       // linear RoPE scaling divides positions

  // scratch, (n_tokens, dim) row-major
  int64_t cap_ = 0;
  std::vector<float> x_, xb_, q_, k_, v_, att_, hb_, hb2_;
  std::vector<int32_t> pos_;     // (n_tokens) position of each batch token
};

}  // namespace tmill
