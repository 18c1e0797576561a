// CUDA kernels of the GPU backend, host-callable (defined in gpu/*.cu; built with -DTM_CUDA=ON only,
// else each returns an error). All pointers are device memory (gpu/device.h); calls are asynchronous
// on the default stream, synchronize() waits and reports a kernel's failure. The CPU kernels
// (kernels/matmul.h matmul_reference) are their oracle: tests/unit/gpu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/result.h"

namespace tmill::gpu {

// True for the weight types gemv() reads: F32, F16, BF16, Q8_0, Q4_0.
bool gemv_supports(DType t);
// Decode's matrix-vector product, dequantizing in registers: y[r] = dot(row r of W, x) for the
// `rows` rows of W (row-major in its file type, row_bytes apart), x of `cols` floats. One warp per
// row; each lane takes whole 32-element blocks (quantized types) or strided elements.
Status gemv(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, float* y);
// y = x / rms(x) * weight, row by row (n_rows rows of n floats).
Status rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps);
// Waits for the work queued so far; an error names a kernel that failed.
Status synchronize();

}  // namespace tmill::gpu
