// Every weight type the device reads (get_rows_supports: the list gemv and get_rows take; the block
// types are the tensor-core product's too), for the kernel tests to loop over: a type added to the
// list without its kernels fails them. Include after gpu/kernels.h (either build of it).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "gpu/kernels.h"
#include "quant/quant.h"

namespace tmill::gpu {

inline std::vector<DType> device_weight_types() {
  std::vector<DType> out;
  for (uint32_t id = 0; id < 64; ++id)
    if (const DTypeInfo* info = dtype_info(id); info && get_rows_supports(info->type)) out.push_back(info->type);
  return out;
}

// quantize_row with a uniform importance vector where the type needs one (IQ2_XXS, IQ2_XS, IQ1_S).
inline void quantize_test_row(DType t, const float* src, void* dst, int64_t n) {
  std::vector<float> ones;
  if (quantize_needs_importance(t)) ones.assign(static_cast<size_t>(n), 1.0f);
  quantize_row(t, src, dst, n, ones.empty() ? nullptr : ones.data());
}

// Elements per block of a block type (32 or 256); 32 for F32/F16/BF16, the tests' unit of width.
inline int64_t test_block(DType t) { return block_type_supported(t) ? dtype_info(t).block_size : 32; }

}  // namespace tmill::gpu
