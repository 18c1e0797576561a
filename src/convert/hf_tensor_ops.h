// Element-level helpers of the Hugging Face converter (hf_model.cpp), private to src/convert: the
// float types a safetensors tensor maps to, and the two ways a GGUF expert tensor is produced from a
// fused HF tensor (a strided gather, optionally transposed, for transformers 5's and gpt-oss's fused
// experts; a bit-exact MXFP4 repack for gpt-oss's quantized checkpoints).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "formats/safetensors.h"

namespace tmill {

// A shape for messages: "[2, 3]".
std::string shape_str(const std::vector<int64_t>& shape);

// The GGUF type of a float safetensors dtype (F32, F16, BF16); nullopt for the others.
std::optional<DType> float_dtype(StDType t);

// Part of a fused expert tensor: the HF tensor seen as n matrices of A x B; output matrix e has `rows`
// rows of `cols`, its element (r, c) HF's (r0 + r * step, c), or with `transpose` HF's (c, r0 + r * step).
// Halves of transformers 5's gate_up_proj (step 1), gpt-oss's interleaved gate/up columns (step 2,
// transposed: its experts compute x @ W).
struct Gather {
  SafetensorsModel::Ref src;
  int64_t n, A, B;
  int64_t r0, step, rows, cols;
  bool transpose;
};

// Writes the gathered matrices in `out` (F32, F16 or BF16): nbytes must be n * rows * cols elements.
Status gather(const Gather& g, DType out, uint8_t* dst, size_t nbytes);

// gpt-oss's MXFP4 experts -> ggml's block_mxfp4, as llama.cpp's GptOssModel.repack_mxfp4 does (bits only
// move): HF keeps each row's blocks of 32 as 16 bytes (*_blocks, element 2k in byte k's low nibble,
// 2k+1 in its high one) and an E8M0 exponent per block (*_scales); ggml's block is the exponent, then
// byte j = element j | element j + 16 << 4. Output row r of expert e is HF row r0 + r * step of it.
struct Mxfp4Rows {
  SafetensorsModel::Ref blocks, scales;
  int64_t n, R, G;  // n experts of R rows of G blocks
  int64_t r0, step, rows;
};

// Writes n * rows * G ggml MXFP4 blocks (17 bytes each).
Status repack_mxfp4(const Mxfp4Rows& m, uint8_t* dst, size_t nbytes);

}  // namespace tmill
