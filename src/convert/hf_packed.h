// Integer weights packed into int32 words by another tool, read into GGUF tensors (the converter's
// half of HfConfig::packed): GPTQ (AutoGPTQ / GPTQModel, checkpoint_format gptq and gptq_v2), AWQ
// (AutoAWQ's GEMM layout) and compressed-tensors' pack-quantized format (llm-compressor's W4A16 /
// W8A16). Each weight is scale * (q - zero) with q of `bits` bits and one scale and zero point per
// group of input columns (GPTQ's g_idx, or compressed-tensors' weight_g_idx, may assign columns to
// groups out of order: act-order). The layouts (what llama.cpp's converter and vLLM's kernels read):
//   GPTQ   qweight [in / P, out] (P = 32 / bits values per word, along the input, the lowest bits
//          first), qzeros [groups, out / P] (along the output), scales [groups, out], g_idx [in];
//          checkpoint_format "gptq" stores each zero point minus one.
//   AWQ    qweight [in, out / 8] (along the output, the 8 nibbles of a word holding outputs
//          0 2 4 6 1 3 5 7), qzeros [groups, out / 8] likewise, scales [groups, out].
//   compressed-tensors  weight_packed [out, ceil(in / P)] (along the input), weight_scale [out, groups],
//          weight_shape [2] = (out, in), optional weight_zero_point [ceil(out / P), groups] (along the
//          output; without it zero = 2^(bits - 1)) and weight_g_idx [in].
// A 4-bit matrix whose 32-column blocks each lie in one group becomes Q4_0 (every zero point 8) or
// Q4_1 (d = scale, m = -scale * zero) blocks holding the same values (Q4_1's m rounded to fp16);
// any other (2- or 8-bit, groups across blocks, scales fp16 cannot hold) is dequantized to a float
// type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"

namespace tmill {

enum class PackedPart { Weight, Zeros, Scales, GIdx, Shape };

// A tensor of a packed matrix under `format`: "model.layers.0.mlp.up_proj.qweight" ->
// ("model.layers.0.mlp.up_proj", Weight) (GPTQ / AWQ: qweight, qzeros, scales, g_idx;
// compressed-tensors: weight_packed, weight_zero_point, weight_scale, weight_g_idx, weight_shape).
// nullopt for other names.
std::optional<std::pair<std::string, PackedPart>> packed_part(const std::string& name, HfConfig::Packed format);

struct PackedMatrix {
  HfConfig::Packed format = HfConfig::Packed::None;
  int bits = 4;
  int64_t group = 0;            // input columns per group; 0: one group per row
  bool zero_minus_one = false;  // GPTQ checkpoint_format "gptq"
  int64_t rows = 0, cols = 0;   // the float weight's shape: outputs x inputs
  std::string where;            // "FILE: tensor 'NAME'" of the packed weight, for errors
  SafetensorsModel::Ref weight{}, scales{};
  std::optional<SafetensorsModel::Ref> zeros, g_idx, shape;
  std::optional<DType> blocks;  // what packed_block_type said (set by the converter's plan)
};

// The tensors of module `base` (".qweight" ... or ".weight_packed" ...) for a rows x cols weight:
// every part present where the format needs it, of its dtype and shape (errors name the tensor).
Result<PackedMatrix> open_packed(const SafetensorsModel& w, const HfConfig& c, const std::string& base, int64_t rows,
                                 int64_t cols);

// Scales, zero points and each column's group (what decides the GGUF type; cheap to read).
struct PackedGroups {
  int64_t groups = 0;
  std::vector<float> scale;       // rows * groups
  std::vector<int32_t> zero;      // rows * groups
  std::vector<int32_t> group_of;  // cols
};
Result<PackedGroups> read_packed_groups(const PackedMatrix& m);
// The integers q (rows * cols, row-major).
std::vector<uint8_t> read_packed_values(const PackedMatrix& m);

// Q4_0 or Q4_1 when the matrix's values fit those blocks as described above; nullopt: dequantize.
Result<std::optional<DType>> packed_block_type(const PackedMatrix& m);

// Writes the matrix as `out` (the type packed_block_type chose, or F32 / F16 / BF16), output row r
// from row llama_qk_permuted_source_row(r, permute_head_dim) when permute_head_dim > 0.
Status write_packed(const PackedMatrix& m, DType out, int64_t permute_head_dim, uint8_t* dst, size_t nbytes);

}  // namespace tmill
