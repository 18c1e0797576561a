#include "kernels/matmul.h"

#include <vector>

#include "core/thread_pool.h"
#include "quant/quant.h"

namespace tmill {

PreparedMatrix::PreparedMatrix(const Matrix& m) : src_(m) {}

void matmul_reference(const Matrix& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n_tokens) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, w.row(r), row.data(), w.cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * ldx;
      float acc = 0.0f;
      for (int64_t c = 0; c < w.cols; ++c) acc += row[c] * xt[c];
      y[t * ldy + r] = acc;
    }
  }
}

void get_row(const Matrix& w, int64_t r, float* dst) { dequantize_row(w.type, w.row(r), dst, w.cols); }

// Generic path: rows split over threads, each row dequantized once and dotted with every token.
// Type- and ISA-specific fast paths replace this per dtype.
void matmul(const PreparedMatrix& pw, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n_tokens,
            ThreadPool* pool) {
  const Matrix& w = pw.source();
  auto body = [&](int64_t r0, int64_t r1, int) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(w.type, w.row(r), row.data(), w.cols);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * ldx;
        float acc = 0.0f;
        for (int64_t c = 0; c < w.cols; ++c) acc += row[c] * xt[c];
        y[t * ldy + r] = acc;
      }
    }
  };
  if (pool) pool->parallel_for(w.rows, 16, body);
  else body(0, w.rows, 0);
}

}  // namespace tmill
