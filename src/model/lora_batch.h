// The LoRA deltas of one batched forward run. The base products run over every row of the batch;
// then, for each adapter binding of the batch, the rows of its sequences are gathered and get
// y += scale * factor * B (A x) (two small products on the pool). Without bindings (the common
// case) begin() leaves it inactive and Forward calls nothing else.
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch.h"
#include "model/lora.h"

namespace tmill {

class ThreadPool;

class LoraBatch {
 public:
  // Groups the batch's token rows by binding; inactive when the batch has none.
  void begin(const ForwardBatch& batch);
  bool active() const { return !groups_.empty(); }
  // Some group's adapter adapts this matrix of layer l.
  bool touches(int64_t l, LoraSlot s) const;

  // y[t] += delta for every token row t of an adapted group; x and y are token-row matrices.
  void apply(int64_t l, LoraSlot s, const float* x, int64_t ldx, float* y, int64_t ldy, ThreadPool* pool);
  // The output projection: logits row r belongs to token row token_of_row[r].
  void apply_output(const std::vector<int64_t>& token_of_row, const float* x, int64_t ldx, float* y, int64_t ldy,
                    ThreadPool* pool);
  // x[t] (the embedding rows) += scale * factor * B a_{token}.
  void apply_embedding(const ForwardBatch& batch, float* x, int64_t ldx);

 private:
  struct Group {
    LoraBinding binding;
    std::vector<int64_t> rows;  // token rows (apply) or logits rows (apply_output)
  };
  void apply_weight(const LoraWeight& w, float scale, const std::vector<int64_t>& rows, const float* x, int64_t ldx,
                    float* y, int64_t ldy, ThreadPool* pool);

  static constexpr int64_t kSerialRows = 32;  // groups of at most this many rows skip the pool
  std::vector<Group> groups_;
  std::vector<int32_t> binding_of_token_;
  std::vector<float> xs_, t_;  // gathered inputs, A x
};

}  // namespace tmill
