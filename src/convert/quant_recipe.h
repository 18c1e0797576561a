// Quantization recipes ("file types"): which tensor gets which block type, following llama.cpp's
// llama_tensor_get_type (src/llama-quant.cpp) so that a Q4_K_M we write has the same per-tensor
// types as llama.cpp's Q4_K_M of the same model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace tmill {

// llama_ftype numbers, written to general.file_type.
enum class LlamaFileType : uint32_t {
  ALL_F32 = 0, MOSTLY_F16 = 1, MOSTLY_Q4_0 = 2, MOSTLY_Q4_1 = 3, MOSTLY_Q8_0 = 7, MOSTLY_Q5_0 = 8,
  MOSTLY_Q5_1 = 9, MOSTLY_Q2_K = 10, MOSTLY_Q3_K_S = 11, MOSTLY_Q3_K_M = 12, MOSTLY_Q3_K_L = 13,
  MOSTLY_Q4_K_S = 14, MOSTLY_Q4_K_M = 15, MOSTLY_Q5_K_S = 16, MOSTLY_Q5_K_M = 17, MOSTLY_Q6_K = 18,
  MOSTLY_IQ2_XXS = 19, MOSTLY_IQ2_XS = 20, MOSTLY_Q2_K_S = 21, MOSTLY_IQ3_XS = 22, MOSTLY_IQ3_XXS = 23,
  MOSTLY_IQ1_S = 24, MOSTLY_IQ4_NL = 25, MOSTLY_IQ3_S = 26, MOSTLY_IQ3_M = 27, MOSTLY_IQ2_S = 28,
  MOSTLY_IQ2_M = 29, MOSTLY_IQ4_XS = 30, MOSTLY_IQ1_M = 31, MOSTLY_BF16 = 32, MOSTLY_MXFP4_MOE = 38,
};

struct QuantRecipe {
  std::string name;    // canonical llama.cpp spelling ("Q4_K_M")
  LlamaFileType ftype;
  DType default_type;  // the type of most 2-D weights
};

// Case-insensitive; accepts llama.cpp's names (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q2_K_S, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ2_M, IQ3_XXS, IQ3_XS, IQ3_S, IQ3_M, IQ4_NL, IQ4_XS, MXFP4_MOE) and its aliases Q3_K = Q3_K_M,
// Q4_K = Q4_K_M, Q5_K = Q5_K_M, MXFP4 = MXFP4_MOE, as well as the ftype number.
Result<QuantRecipe> recipe_from_name(std::string_view name);
std::vector<QuantRecipe> all_recipes();  // for --help

// What the recipe needs to know about the model (from GGUF metadata).
struct QuantModelShape {
  std::string arch = "llama";
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_expert = 0;
};

struct QuantTensorDesc {
  std::string name;
  std::vector<int64_t> ne;  // ggml order
  DType type = DType::F32;
};

struct QuantPlanOptions {
  bool pure = false;                         // every quantizable tensor gets the default type
  std::optional<DType> output_tensor_type;   // --output-tensor-type
  std::optional<DType> token_embedding_type; // --token-embedding-type
  bool has_imatrix = false;
  bool leave_output_tensor = false;          // keep output.weight as it is (--leave-output-tensor)
};

struct QuantTensorPlan {
  bool quantize = false;  // a weight matrix the recipe may convert (else copied as it is)
  DType target = DType::F32;
  std::string note;       // e.g. "ncols 896 not divisible by 256 for Q4_K: fell back to Q5_0"
};

// llama.cpp's rule for which tensors are weight matrices that may be quantized (2-D or 3-D, name ends
// in "weight", not a norm, not an MoE router, not positional embeddings, ...).
bool tensor_allows_quantization(const QuantTensorDesc& t);

// llama.cpp's tensor_requires_imatrix: tensors quantized to IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S or
// IQ3_XXS (and Q2_K in a Q2_K_S file) need importance data, except token_embd / per_layer_token_embd /
// output.weight. llama-quantize refuses such a file without an imatrix, and so do we.
bool tensor_requires_imatrix(const std::string& name, DType target, LlamaFileType ftype);

// How to make an imatrix, for the errors that ask for one.
inline constexpr const char* kImatrixHowTo =
    "make one with `tokenmill eval imatrix --model MODEL-f16.gguf --text calibration.txt -o imatrix.gguf` "
    "(or llama.cpp's llama-imatrix) and quantize with `tokenmill quantize IN OUT --type T --imatrix imatrix.gguf` "
    "(quantizing at load, --quantization, takes no imatrix)";

// One plan per tensor (same order as `tensors`). The mixture's layer-dependent choices are made in
// llama.cpp's tensor order (by layer number, then name), whatever the order in the file. Without
// opt.has_imatrix, a plan with a tensor that tensor_requires_imatrix is an error (naming the tensor).
Result<std::vector<QuantTensorPlan>> plan_tensor_types(const QuantRecipe& recipe, const QuantModelShape& shape,
                                                  const std::vector<QuantTensorDesc>& tensors, const QuantPlanOptions& opt);

}  // namespace tmill
