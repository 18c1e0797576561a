// Scalar reference (de)quantizers for the GGUF tensor formats (layouts in quant/blocks.h).
// The quantizers follow ggml's reference algorithms (ggml-quants.c) so that files we write have
// the same quality as llama.cpp's; Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_1 and Q8_K reproduce ggml's
// *_ref functions bit for bit, and IQ4_NL / IQ4_XS reproduce quantize_iq4_nl / quantize_iq4_xs (the
// searching versions llama-quantize calls; ggml's quantize_row_iq4_nl_ref skips the search) bit for
// bit, with and without importance (tests/unit/quant/iq4_golden_test.cpp); MXFP4 reproduces
// quantize_mxfp4 (= quantize_row_mxfp4_ref; tests/unit/quant/mxfp4_golden_test.cpp); the lattice
// i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M reproduce quantize_iq2_xxs ...
// quantize_iq1_m (tests/unit/quant/iq_lattice_quant_test.cpp). These are the oracles the
// optimized kernels are tested against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace tmill {

class ThreadPool;

// True for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
// IQ4_NL, IQ4_XS, MXFP4, and the lattice i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M (bit-identical to ggml's dequantize_row_*).
bool can_dequantize(DType t);
// n elements (a multiple of the block size) from src (n / block_size blocks) into dst.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// The IqKind (quant/iq_decode.h) of a lattice i-quant (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M), -1 for every other type.
int iq_kind(DType t);

// True for the same set as can_dequantize. The lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S, IQ1_S, IQ1_M) reproduce ggml's quantize_iq2_xxs ... quantize_iq1_m (what llama-quantize
// calls) bit for bit (tests/unit/quant/iq_lattice_quant_test.cpp); their search tables are built on
// first use (once per process, thread-safe).
bool can_quantize(DType t);
// True for the types whose quantizer needs an importance vector (ggml asserts without one): IQ2_XXS,
// IQ2_XS, IQ1_S. llama-quantize also refuses IQ2_S, IQ3_XXS and IQ1_M tensors without an imatrix
// (convert/quant_recipe.h applies that rule); their quantizers work without one.
bool quantize_needs_importance(DType t);
// Quantizes ONE row of n elements (a multiple of the block size) and returns the bytes written
// (dtype_row_bytes(t, n)). `importance` (n per-column weights, e.g. mean squared activations from an
// imatrix) selects llama.cpp's importance-weighted search where ggml has one (Q4_0, Q4_1, Q5_0,
// Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS, the lattice i-quants); it is ignored by F32/F16/BF16/Q8_0/Q8_1/
// Q8_K/MXFP4 and required by the quantize_needs_importance types. Some types (Q4_0 ... with an
// importance vector, the i-quants) use statistics of the whole row or super-block, so pass rows,
// not arbitrary chunks.
size_t quantize_row(DType t, const float* src, void* dst, int64_t n, const float* importance = nullptr);

// rows x cols row-major matrix, each row quantized independently into dst (rows * row_bytes).
// `importance` has `cols` entries (may be null). Rows are split over the pool (null = this thread).
size_t quantize_tensor(DType t, const float* src, void* dst, int64_t rows, int64_t cols,
                       const float* importance, ThreadPool* pool);
// Dequantizes `n_elements` (a multiple of the block size) using the pool.
void dequantize_tensor(DType t, const void* src, float* dst, int64_t n_elements, ThreadPool* pool);

// Activation quantizer used by K-quant dot products: one Q8_K block per 256 floats.
void quantize_row_q8_K(const float* src, void* dst, int64_t n);

}  // namespace tmill
