// gpu/ops.h's CUDA backend: the table over gpu/kernels.h and gpu/device.h (plain C++: it links in
// both builds, and without CUDA each call answers with no_cuda.cpp's error). Compiled once more for the
// emulator (gpu/abi.h), where it is also cuda_emu_ops().
#include "gpu/device.h"
#include "gpu/kernels.h"
#include "gpu/ops.h"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {

class CudaOps final : public Ops {
 public:
#if defined(TM_CUDA_EMU)
  std::string name() const override { return "cuda-emu"; }
#else
  std::string name() const override { return "cuda"; }
#endif
  Status available() const override {
    auto d = gpu_devices();
    if (!d.ok()) return d.error_value();
    return {};
  }
  Result<std::vector<GpuInfo>> devices() const override { return gpu_devices(); }
  Result<void*> alloc(size_t bytes) override { return device_alloc(bytes); }
  void release(void* p) override { device_free(p); }
  Status upload(void* dst, const void* src, size_t bytes) override { return copy_to_device(dst, src, bytes); }
  Status download(void* dst, const void* src, size_t bytes) override { return copy_to_host(dst, src, bytes); }
  Status copy(void* dst, const void* src, size_t bytes) override { return copy_on_device(dst, src, bytes); }
  bool supports(DType weight) const override { return gemv_supports(weight); }
  Status matmul(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x,
                int64_t n_tokens, float* y, void* workspace, size_t workspace_bytes) override {
    if (workspace && n_tokens >= kGemmTcMinTokens && gemm_tc_supports(type, rows, cols, row_bytes))
      return gemm_tc(type, w, rows, cols, row_bytes, x, n_tokens, y, workspace, workspace_bytes);
    return gemm(type, w, rows, cols, row_bytes, x, n_tokens, y);
  }
  size_t matmul_workspace_bytes() const override { return kGemmTcWorkspaceBytes; }
  Status matmul_id(DType type, const void* w, size_t expert_bytes, int64_t rows, int64_t cols, size_t row_bytes,
                   const float* x, int64_t x_div, const int32_t* ids, int64_t n_pairs, float* y,
                   const int32_t* order) override {
    return gemm_id(type, w, expert_bytes, rows, cols, row_bytes, x, x_div, ids, n_pairs, y, order);
  }
  Status moe_sort(const int32_t* ids, int64_t n_pairs, int64_t n_expert, int32_t* order) override {
    return gpu::moe_sort(ids, n_pairs, n_expert, order);
  }
  Status moe_route(const GpuMoeRouteArgs& a) override { return gpu::moe_route(a); }
  Status moe_combine(float* y, const float* yp, const float* weights, int64_t n_tokens, int64_t k, int64_t n,
                     const float* shared, const float* shared_gate) override {
    return gpu::moe_combine(y, yp, weights, n_tokens, k, n, shared, shared_gate);
  }
  bool supports_rows(DType type) const override { return get_rows_supports(type); }
  Status get_rows(DType type, const void* w, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n, float* out,
                  float scale) override {
    return gpu::get_rows(type, w, row_bytes, cols, ids, n, out, scale);
  }
  Status rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) override {
    return gpu::rmsnorm(x, weight, y, n_rows, n, eps);
  }
  Status add(float* y, const float* x, int64_t n, float scale) override { return gpu::add(y, x, n, scale); }
  Status scale(float* x, int64_t n, float s) override { return gpu::scale(x, n, s); }
  Status attn_temperature(float* q, const int32_t* pos, int64_t n_tokens, int64_t width, float scale,
                          int64_t floor_len) override {
    return gpu::attn_temperature(q, pos, n_tokens, width, scale, floor_len);
  }
  Status add_rows(float* y, const float* b, int64_t n_rows, int64_t n) override { return gpu::add_rows(y, b, n_rows, n); }
  Status add_rows_id(float* y, const float* b, const int32_t* ids, int64_t n_rows, int64_t n) override {
    return gpu::add_rows_id(y, b, ids, n_rows, n);
  }
  Status scatter_add(float* y, const float* u, const int32_t* rows, int64_t n_rows, int64_t n, float scale) override {
    return gpu::scatter_add(y, u, rows, n_rows, n, scale);
  }
  Status swiglu_oai(float* g, const float* u, int64_t n) override { return gpu::swiglu_oai(g, u, n); }
  Status rope(const GpuRopeArgs& a) override { return gpu::rope(a); }
  Status kv_store(const GpuKvStoreArgs& a) override { return gpu::kv_store(a); }
  Status attention(const GpuAttnArgs& a) override { return paged_attention_decode(a); }
  Status silu_mul(float* g, const float* u, int64_t n) override { return gpu::silu_mul(g, u, n); }
  Status gelu_mul(float* g, const float* u, int64_t n) override { return gpu::gelu_mul(g, u, n); }
  Status softcap(float* x, int64_t n, float cap) override { return gpu::softcap(x, n, cap); }
  Status argmax_rows(const float* x, int64_t n_rows, int64_t n, int32_t* out) override {
    return gpu::argmax_rows(x, n_rows, n, out);
  }
  Status synchronize() override { return gpu::synchronize(); }
  Status begin_capture() override { return gpu::begin_capture(); }
  Result<void*> end_capture() override { return gpu::end_capture(); }
  Status replay(void* graph) override { return launch_graph(graph); }
  void drop_graph(void* graph) override { destroy_graph(graph); }
};

}  // namespace

Ops& cuda_ops() {
  static CudaOps ops;
  return ops;
}

}  // namespace tmill::gpu::inline TM_GPU_ABI

#if defined(TM_CUDA_EMU)
namespace tmill::gpu {
Ops& cuda_emu_ops() { return cuda_ops(); }
}  // namespace tmill::gpu
#endif
