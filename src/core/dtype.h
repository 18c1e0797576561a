// Tensor element types, numbered exactly as GGUF/ggml number them (ggml_type).
// Block layouts and (de)quantizers live in quant/; this header only knows sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tmill {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
  // tokenmill's own, past ggml's ids: KV cache element types only (--kv-cache-dtype fp8_e4m3 / fp8_e5m2),
  // never a tensor of a file -- dtype_info(uint32_t) and dtype_from_name do not know them.
  F8_E4M3 = 200, F8_E5M2 = 201,
};

struct DTypeInfo {
  DType type;
  const char* name;     // as llama.cpp spells it ("Q4_K", "BF16", ...)
  int64_t block_size;   // elements per block
  int64_t type_size;    // bytes per block
  bool quantized;
};

// nullptr for ids that are not (or no longer) ggml types (F8_E4M3 and F8_E5M2 included).
const DTypeInfo* dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType t);
inline const char* dtype_name(DType t) { return dtype_info(t).name; }
// Case-insensitive lookup by name ("q8_0", "f16").
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of n elements (n must be a multiple of the block size); nullopt on overflow or misfit.
std::optional<uint64_t> dtype_row_bytes(DType t, uint64_t n);

}  // namespace tmill
