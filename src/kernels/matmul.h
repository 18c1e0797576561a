// Matrix products of weights (any supported dtype) with float32 activations.
//   Y[t][r] = sum_c W[r][c] * X[t][c]   for t < n_tokens, r < W.rows
// The dispatcher picks the best implementation for the weight type and the active ISA
// (core/cpu.h); `matmul_reference` is the plain oracle the fast paths are tested against.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/matrix.h"

namespace tmill {

class ThreadPool;

// A weight prepared for fast products (e.g. repacked into a SIMD-friendly layout at load time).
// Holds a view of the original when no repacking applies. Create once per weight, reuse forever.
class PreparedMatrix {
 public:
  PreparedMatrix() = default;
  explicit PreparedMatrix(const Matrix& m);
  // The weight in its file layout (a huge-page copy for weights read in that layout, kernels/pack.h).
  const Matrix& source() const { return src_; }
  int64_t rows() const { return src_.rows; }
  int64_t cols() const { return src_.cols; }
  // Bytes this object allocated (packed layout and/or the huge-page copy); 0 when the kernels read
  // the weight where it was (e.g. in the file mapping).
  size_t own_bytes() const { return own_bytes_; }
  // Opaque per-implementation data (repacked weights etc.), owned here.
  std::shared_ptr<void> packed;
  int packed_kind = 0;

 private:
  Matrix src_;
  std::shared_ptr<void> resident_;  // resident_copy(m), when used
  size_t own_bytes_ = 0;
};

// X: n_tokens rows of W.cols floats (row stride ldx); Y: n_tokens rows (row stride ldy) of W.rows.
void matmul(const PreparedMatrix& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n_tokens,
            ThreadPool* pool);

// Several products with the same activations (e.g. Q/K/V or gate/up): X is converted (quantized or
// rounded to bf16) once per format and all products run in one parallel region (one fork/join).
// Every weight must have the same number of columns; outputs must not overlap; at most 8 outputs.
struct MatmulOutput {
  const PreparedMatrix* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};
void matmul_many(const MatmulOutput* outs, int count, const float* x, int64_t ldx, int64_t n_tokens,
                 ThreadPool* pool);

// The FFN down projection with SwiGLU folded in: Y = W (silu(G) * U). G (n_tokens rows of W.cols,
// stride ldg) is overwritten with silu(G) * U (as silu_mul, kernels/ops.h), a tile of rows at a
// time inside the product's parallel region, just before that tile is converted for the product:
// the rows are converted while they are still in cache, and SwiGLU needs no fork/join of its own.
// Y is bitwise the same as silu_mul followed by matmul.
void matmul_swiglu(const PreparedMatrix& w, float* gate, int64_t ldg, const float* up, int64_t ldu, float* y,
                   int64_t ldy, int64_t n_tokens, ThreadPool* pool);

// The oracle: dequantizes each row (quant/quant.h) and accumulates in float32 in index order.
void matmul_reference(const Matrix& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n_tokens);

// Dequantizes row r of W into dst (W.cols floats): embedding lookups.
void get_row(const Matrix& w, int64_t r, float* dst);

}  // namespace tmill
