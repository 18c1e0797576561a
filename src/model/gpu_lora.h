// LoRA adapters on a GPU backend (gpu/ops.h): the device's copy of each adapter a step binds (A and
// B of every adapted matrix as float32, uploaded on first use and kept while the cache has room) and
// the deltas of one step, as model/lora_batch.h computes them on the CPU: for each binding, the token
// rows of its sequences are gathered (get_rows), t = A x and u = B t run as two F32 products, and
// scatter_add puts scale * factor * u back into those rows. Four calls per adapted matrix and binding,
// whatever the number of sequences. GpuForward runs steps with bindings eagerly (no graphs).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/result.h"
#include "gpu/ops.h"
#include "model/batch.h"
#include "model/lora.h"

namespace tmill {

class GpuLora {
 public:
  // max_cached: adapters kept on the device (least recently used dropped beyond it; one still bound
  // later is uploaded again).
  GpuLora(gpu::Ops& ops, int64_t n_layer, int64_t max_cached)
      : ops_(ops), n_layer_(n_layer), max_cached_(max_cached < 1 ? 1 : max_cached) {}
  ~GpuLora();
  GpuLora(const GpuLora&) = delete;
  GpuLora& operator=(const GpuLora&) = delete;

  // The step's groups: each binding's token rows, its rows among the logits rows (logit_rows: the
  // token row of each) and its tokens' ids, uploaded; adapters not on the device yet uploaded.
  // Inactive (the rest are no-ops) when no sequence has a binding.
  Status begin(const ForwardBatch& batch, const std::vector<int64_t>& logit_rows);
  bool active() const { return !groups_.empty(); }

  // y (token rows of y_width floats) += the deltas of layer l's matrix s for x (rows of x_width floats).
  Status apply(int64_t l, LoraSlot s, const float* x, int64_t x_width, float* y, int64_t y_width);
  // The output matrix: x and y hold the logits rows (hidden width E, n_vocab V).
  Status apply_output(const float* x, int64_t E, float* y, int64_t V);
  // The token embedding: x[t] (rows of E) += embd_scale * scale * factor * B a_{token t} (x already
  // times embd_scale, gemma's sqrt(n_embd); the CPU adds the delta before scaling).
  Status apply_embedding(float* x, int64_t E, float embd_scale);

  // Bytes of device memory the cached adapters hold.
  uint64_t device_bytes() const;

 private:
  struct DevWeight {
    const float* a = nullptr;  // rank x cols (embedding: n_vocab x rank)
    const float* b = nullptr;  // rows x rank
    int64_t rank = 0, cols = 0, rows = 0;
    float factor = 1.0f;
  };
  struct DevAdapter {
    uint64_t serial = 0, last_used = 0, bytes = 0;
    int64_t widest = 0;  // cols + rank + rows of its widest product: the scratch a row of it takes
    std::vector<std::array<DevWeight, kLoraSlots>> layers;
    DevWeight output, embedding;
    std::vector<void*> allocs;
  };
  struct Group {
    const DevAdapter* dev = nullptr;
    float scale = 1.0f;
    const int32_t *rows = nullptr, *out_rows = nullptr, *tokens = nullptr;  // device, into ids_
    int64_t n_rows = 0, n_out = 0;
  };

  Result<const DevAdapter*> device_copy(const LoraAdapter& a);
  Result<DevWeight> upload(const LoraWeight& w, DevAdapter& d);
  void release(DevAdapter& d);
  Status ensure(int64_t ids, int64_t floats);
  // y[rows[i]] += scale * factor * B (A x[rows[i]]) for the n rows (x and y gathered and scattered by rows).
  Status delta(const DevWeight& w, float scale, const float* x, int64_t x_width, const int32_t* rows, int64_t n, float* y,
               int64_t y_width);

  gpu::Ops& ops_;
  int64_t n_layer_, max_cached_;
  uint64_t clock_ = 0;
  std::vector<std::unique_ptr<DevAdapter>> cache_;  // (stable addresses: the step's groups point in)
  std::vector<Group> groups_;
  // device scratch, grown on demand: the step's row lists and token ids; gathered rows, A x, B (A x)
  int32_t* ids_ = nullptr;
  float* scratch_ = nullptr;
  int64_t cap_ids_ = 0, cap_floats_ = 0;
};

}  // namespace tmill
