// Load-time repacking of weights into the layouts the kernels read (kernels/kernel_abi.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/matrix.h"

namespace tmill::kern {

// The packed layout used for a weight type (kPackNone when the type is used in place).
// `allow_bf16_copy`: whether F16 weights get a bf16 copy (only useful where AVX-512 BF16 exists).
int pack_kind_for(DType t, bool allow_bf16_copy);

// Columns per weight block for a packed kind (32 or 256).
int64_t pack_block_cols(int kind);

// Packs `m` into a new weight_buffer (interleaved x16 layouts or the bf16 copy).
// Returns null for kPackNone. `bytes` receives the buffer size.
std::shared_ptr<void> pack_weights(const Matrix& m, int kind, size_t* bytes);

// Row stride (elements) of bf16 activation rows: cols rounded up to 32 (zero-filled).
inline int64_t bf16_copy_stride(int64_t cols) { return (cols + 31) / 32 * 32; }
// Column pairs per group of the x16 bf16 copy of F16 weights (kernel_abi.h).
inline int64_t bf16_x16_pairs(int64_t cols) { return (cols + 1) / 2; }

// 64-byte aligned, zero-initialised buffer; from ~1.3 MiB up 2 MiB aligned with (some of) its pages
// advised to be huge pages (pack.cpp says which).
std::shared_ptr<void> aligned_buffer(size_t bytes);

// Buffer for packed or copied weights (zero-initialised, 64-byte aligned, on huge pages from
// 64 KiB up): pieces of shared huge-page slabs below 32 MiB, an aligned_buffer otherwise.
std::shared_ptr<void> weight_buffer(size_t bytes);

// Lets go of the slab being filled: the next weight_buffer starts a new one. Called once a model's
// weights are prepared, so that a model loaded later (several models in one server) is not carved
// out of the same slab, which would keep the earlier model's pieces resident after it is unloaded.
void end_weight_slab();

// A copy of m's rows in a weight_buffer, for weights the kernels read in their file layout (float
// types; types without a packed layout): the file mapping has 4 KiB pages. Null below 64 KiB.
std::shared_ptr<void> resident_copy(const Matrix& m);

}  // namespace tmill::kern
