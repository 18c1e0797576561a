// Logits of every position of one token sequence, computed by the batched Forward in sub-batches
// and streamed row by row: the logits of a whole 2048-token chunk over a 152k vocabulary would be
// ~1.2 GB, a 64-token sub-batch is ~39 MB. This is what perplexity, KL divergence and imatrix
// collection run on (no engine, no scheduler: one sequence, its own KV cache).
//
//   LogitStream s(model, {.max_ctx = 512, .batch = 64, .kv_dtype = DType::F16}, pool);
//   s.reset();
//   s.feed(tokens, /*logits_from=*/256, [&](int64_t pos, const float* row) { ... });  // row: n_vocab floats
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/forward.h"
#include "model/kv_storage.h"
#include "model/lora.h"
#include "model/model.h"

namespace tmill::eval {

// "auto" (f32 for F32 models, else f16) or a --kv-cache-dtype name (model/kv_storage.h) -> KV element type.
Result<DType> parse_kv_dtype(const std::string& name, const Model& model);
// "f32", "f16", "bf16", "int8", "q4_0", "fp8_e4m3", "fp8_e5m2".
const char* kv_dtype_name(DType t);

struct LogitStreamOptions {
  int64_t max_ctx = 512;           // longest sequence (positions) one reset() .. feed() run may reach
  int64_t batch = 64;              // tokens per Forward call (bounds the logits buffer: batch x n_vocab floats)
  DType kv_dtype = DType::F16;     // any type kv_type_supported takes
  int64_t block_size = 16;
};

class LogitStream {
 public:
  // Callback per logits row: the position of the token whose next-token distribution it is, and
  // n_vocab floats valid only during the call.
  using RowFn = std::function<void(int64_t pos, const float* logits)>;

  static Result<std::unique_ptr<LogitStream>> create(std::shared_ptr<const Model> model,
                                                     const LogitStreamOptions& opt, ThreadPool* pool);
  // Over an existing Forward: two streams of one model (e.g. two KV types) share its prepared
  // (repacked) weights. They must not feed concurrently; an activation observer is shared too.
  static Result<std::unique_ptr<LogitStream>> create(std::shared_ptr<Forward> forward, const LogitStreamOptions& opt);
  std::shared_ptr<Forward> forward() const { return forward_; }

  // Starts a new sequence at position 0 (the KV cache is reused, not cleared: positions are overwritten).
  void reset() { pos_ = 0; }
  // Appends tokens to the sequence. Logits rows are produced for positions >= logits_from (absolute
  // positions of the sequence), in order; positions before it are computed without logits. Errors
  // when the sequence would exceed max_ctx or a token is outside the vocabulary.
  Status feed(std::span<const int32_t> tokens, int64_t logits_from, const RowFn& fn);

  int64_t pos() const { return pos_; }
  int64_t n_vocab() const { return model().config().n_vocab; }
  const Model& model() const { return forward_->model(); }  // the Forward keeps it alive
  const LogitStreamOptions& options() const { return opt_; }
  // Applies a LoRA adapter to the sequences fed from now on (null: the base model).
  void set_lora(std::shared_ptr<const LoraAdapter> adapter, float scale);
  // For imatrix collection (see Forward::set_activation_observer).
  void set_activation_observer(ActivationObserver* o) { forward_->set_activation_observer(o); }

 private:
  LogitStream() = default;
  LogitStreamOptions opt_;
  std::shared_ptr<Forward> forward_;
  KvStorage kv_;
  std::vector<int32_t> block_table_;
  std::vector<float> logits_;
  ForwardBatch batch_;
  std::shared_ptr<const LoraAdapter> lora_;
  int64_t pos_ = 0;
};

}  // namespace tmill::eval
