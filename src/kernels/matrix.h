// A weight matrix as stored in the model file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace tmill {

// `rows` output rows of `cols` elements each (GGUF ne = [cols, rows]), row-major, in its file type.
// y = W x means y[r] = dot(row r, x).
struct Matrix {
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  size_t row_bytes = 0;
  std::string name;
  bool valid() const { return data != nullptr; }
  // Bytes of the stored matrix (0 when there is none).
  size_t bytes() const { return valid() ? row_bytes * static_cast<size_t>(rows) : 0; }
  const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes; }
};

}  // namespace tmill
