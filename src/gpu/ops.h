// The device operations the GPU forward pass (model/gpu_forward.h) is written in, as one table with
// two backends: CUDA (cuda_ops(): gpu/kernels.h and gpu/device.h on a real device) and the host
// oracle (model/gpu_host_ops.h: the same calls on plain RAM with the CPU's reference math). The
// forward's orchestration (weight upload, buffers, the per-layer sequence, K/V through the block
// tables, which rows get logits) is thereby tested on machines without a GPU against the CPU
// forward, and a device session only has to prove the kernels themselves (tests/unit/gpu).
//
// Pointers the calls take are "device" pointers of that backend (from alloc); calls may queue work
// asynchronously; download and synchronize wait for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "gpu/device.h"
#include "gpu/kernels.h"

namespace tmill::gpu {

class Ops {
 public:
  virtual ~Ops() = default;
  virtual std::string name() const = 0;
  // Ok when the backend can run here; else why not (CUDA: built without it, no device).
  virtual Status available() const = 0;
  // The devices it runs on (the first is used); the host oracle has none.
  virtual Result<std::vector<GpuInfo>> devices() const = 0;
  // Memory: alloc(0) may return null; release(null) is a no-op.
  virtual Result<void*> alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual Status upload(void* dst, const void* src, size_t bytes) = 0;
  virtual Status download(void* dst, const void* src, size_t bytes) = 0;
  virtual Status copy(void* dst, const void* src, size_t bytes) = 0;  // device to device
  // Weight types matmul reads.
  virtual bool supports(DType weight) const = 0;
  // y[t * rows + r] = dot(row r of W, x + t * cols) for t < n_tokens (gpu::gemm; from
  // gpu::kGemmTcMinTokens tokens gpu::gemm_tc on tensor cores, in `workspace`). The workspace a
  // caller should pass (0: none used).
  virtual Status matmul(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x,
                        int64_t n_tokens, float* y, void* workspace, size_t workspace_bytes) = 0;
  virtual size_t matmul_workspace_bytes() const = 0;
  // Experts' products: gpu::gemm_id (pair p: expert ids[p], input row p / x_div, output row p; order:
  // moe_sort's grouping of the pairs by expert, or null).
  virtual Status matmul_id(DType type, const void* w, size_t expert_bytes, int64_t rows, int64_t cols,
                           size_t row_bytes, const float* x, int64_t x_div, const int32_t* ids, int64_t n_pairs,
                           float* y, const int32_t* order) = 0;
  virtual Status moe_sort(const int32_t* ids, int64_t n_pairs, int64_t n_expert, int32_t* order) = 0;
  virtual Status moe_route(const GpuMoeRouteArgs& a) = 0;
  virtual Status moe_combine(float* y, const float* yp, const float* weights, int64_t n_tokens, int64_t k, int64_t n,
                             const float* shared, const float* shared_gate) = 0;
  // Rows of an embedding matrix by id, as F32 times scale (gpu::get_rows); the types it reads.
  virtual bool supports_rows(DType type) const = 0;
  virtual Status get_rows(DType type, const void* w, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n,
                          float* out, float scale) = 0;
  virtual Status rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) = 0;
  virtual Status add(float* y, const float* x, int64_t n, float scale) = 0;  // y += scale * x
  virtual Status scale(float* x, int64_t n, float s) = 0;                    // x *= s
  // row t of q *= 1 + scale ln(floor(pos[t] / floor_len) + 1) (mistral3's attention temperature)
  virtual Status attn_temperature(float* q, const int32_t* pos, int64_t n_tokens, int64_t width, float scale,
                                  int64_t floor_len) = 0;
  virtual Status add_rows(float* y, const float* b, int64_t n_rows, int64_t n) = 0;
  virtual Status add_rows_id(float* y, const float* b, const int32_t* ids, int64_t n_rows, int64_t n) = 0;
  virtual Status scatter_add(float* y, const float* u, const int32_t* rows, int64_t n_rows, int64_t n, float scale) = 0;
  virtual Status swiglu_oai(float* g, const float* u, int64_t n) = 0;
  virtual Status rope(const GpuRopeArgs& a) = 0;
  virtual Status kv_store(const GpuKvStoreArgs& a) = 0;
  virtual Status attention(const GpuAttnArgs& a) = 0;
  virtual Status silu_mul(float* g, const float* u, int64_t n) = 0;
  virtual Status gelu_mul(float* g, const float* u, int64_t n) = 0;
  virtual Status softcap(float* x, int64_t n, float cap) = 0;
  virtual Status argmax_rows(const float* x, int64_t n_rows, int64_t n, int32_t* out) = 0;
  virtual Status synchronize() = 0;
  // Graphs (CUDA graphs; the host backend records the calls): between begin_capture and end_capture
  // the calls above are recorded, not run -- upload, download and synchronize are errors then -- and
  // replay runs the recording again with the same arguments, so only the data behind the pointers may
  // differ from one replay to the next. drop_graph(null) is a no-op.
  virtual Status begin_capture() = 0;
  virtual Result<void*> end_capture() = 0;
  virtual Status replay(void* graph) = 0;
  virtual void drop_graph(void* graph) = 0;
};

// The CUDA backend's kernels and runtime calls on the CPU (gpu/emu/emu.h; `--device cuda-emu`): every
// build has it. Slow (each CUDA thread a fiber); for tests and debugging without a GPU.
Ops& cuda_emu_ops();

}  // namespace tmill::gpu

namespace tmill::gpu::inline TM_GPU_ABI {

// The CUDA backend (one per process, the current device). Built without CUDA, every call returns
// the error that says how to build it. (In the emulated build's translation units, the emulator's.)
Ops& cuda_ops();

}  // namespace tmill::gpu::inline TM_GPU_ABI
