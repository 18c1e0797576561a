// The GPU backend's entry points when tokenmill is built without CUDA (-DTM_CUDA=OFF, the default):
// each says how to get the real ones (gpu/device.cu, gpu/gemv.cu with -DTM_CUDA=ON).
#ifndef TM_HAVE_CUDA
#include "gpu/device.h"
#include "gpu/kernels.h"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {
Error no_cuda() { return Error{"tokenmill was built without the CUDA backend (configure with cmake -DTM_CUDA=ON)"}; }
}  // namespace

bool built_with_cuda() { return false; }
Result<std::vector<GpuInfo>> gpu_devices() { return no_cuda(); }
Result<void*> device_alloc(size_t) { return no_cuda(); }
void device_free(void*) {}
Status copy_to_device(void*, const void*, size_t) { return no_cuda(); }
Status copy_to_host(void*, const void*, size_t) { return no_cuda(); }
Status copy_on_device(void*, const void*, size_t) { return no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(bytes_, o.bytes_);
  return *this;
}
Result<DeviceBuffer> DeviceBuffer::allocate(size_t) { return no_cuda(); }
Status DeviceBuffer::upload(const void*, size_t, size_t) { return no_cuda(); }
Status DeviceBuffer::download(void*, size_t, size_t) const { return no_cuda(); }

bool gemv_supports(DType) { return false; }
Status gemv(DType, const void*, int64_t, int64_t, size_t, const float*, float*) { return no_cuda(); }
Status rmsnorm(const float*, const float*, float*, int64_t, int64_t, float) { return no_cuda(); }
Status paged_attention_decode(const GpuAttnArgs&) { return no_cuda(); }
Status gemm(DType, const void*, int64_t, int64_t, size_t, const float*, int64_t, float*) { return no_cuda(); }
Status gemm_tc(DType, const void*, int64_t, int64_t, size_t, const float*, int64_t, float*, void*, size_t) {
  return no_cuda();
}
Status silu_mul(float*, const float*, int64_t) { return no_cuda(); }
Status gemm_id(DType, const void*, size_t, int64_t, int64_t, size_t, const float*, int64_t, const int32_t*, int64_t,
               float*, const int32_t*) {
  return no_cuda();
}
Status moe_sort(const int32_t*, int64_t, int64_t, int32_t*) { return no_cuda(); }
Status moe_route(const GpuMoeRouteArgs&) { return no_cuda(); }
Status moe_combine(float*, const float*, const float*, int64_t, int64_t, int64_t, const float*, const float*) {
  return no_cuda();
}
Status gelu_mul(float*, const float*, int64_t) { return no_cuda(); }
Status softcap(float*, int64_t, float) { return no_cuda(); }
Status add(float*, const float*, int64_t, float) { return no_cuda(); }
Status scale(float*, int64_t, float) { return no_cuda(); }
Status attn_temperature(float*, const int32_t*, int64_t, int64_t, float, int64_t) { return no_cuda(); }
Status add_rows(float*, const float*, int64_t, int64_t) { return no_cuda(); }
Status add_rows_id(float*, const float*, const int32_t*, int64_t, int64_t) { return no_cuda(); }
Status scatter_add(float*, const float*, const int32_t*, int64_t, int64_t, float) { return no_cuda(); }
Status swiglu_oai(float*, const float*, int64_t) { return no_cuda(); }
Status argmax_rows(const float*, int64_t, int64_t, int32_t*) { return no_cuda(); }
Status rope(const GpuRopeArgs&) { return no_cuda(); }
Status get_rows(DType, const void*, size_t, int64_t, const int32_t*, int64_t, float*, float) { return no_cuda(); }
Status kv_store(const GpuKvStoreArgs&) { return no_cuda(); }
Status synchronize() { return no_cuda(); }
Status begin_capture() { return no_cuda(); }
Result<void*> end_capture() { return no_cuda(); }
Status launch_graph(void*) { return no_cuda(); }
void destroy_graph(void*) {}

}  // namespace tmill::gpu::inline TM_GPU_ABI
#endif
