// Every GGUF tensor a Hugging Face checkpoint becomes (add_hf_model_to_gguf's first half): each HF
// tensor mapped to its GGUF name, checked against what config.json implies (name, shape, dtype, none
// missing or given twice), per-expert matrices stacked into 3-D tensors, fused expert tensors
// (transformers 5, gpt-oss, MXFP4 blocks + scales) split — all before the writer is touched.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convert/hf_model.h"
#include "convert/hf_packed.h"
#include "core/dtype.h"
#include "core/result.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"

namespace tmill {

class HfTensorPlan {
 public:
  // Plans every tensor of m.weights (m must outlive the plan and the writer it fills); the error
  // names the first tensor that does not fit config.json, or the first one missing.
  static Result<HfTensorPlan> make(const HfModel& m);
  // The matrices' output type for --outtype: f32, f16, bf16 or auto (the checkpoint's one float
  // type, else F32).
  Result<DType> weight_type(const std::string& outtype) const;
  // MXFP4 expert tensors kept in their type (gpt-oss checkpoints).
  bool any_mxfp4() const;
  // Adds the planned tensors to w, in llama.cpp's order (the MXFP4 experts first).
  Status write(GgufWriter& w, DType wtype) const;
  size_t size() const { return items_.size(); }
  // The bytes write() gives the tensors' data with 2-D weights as `wtype`, and of those the weight
  // matrices' (what --quantization would re-type) with their element count.
  struct Bytes {
    uint64_t total = 0, matrices = 0;
    double matrix_elements = 0;
  };
  Bytes bytes(DType wtype) const;

 private:
  // One GGUF tensor: one HF tensor, or (experts) one HF matrix per expert stacked along the outermost
  // axis, or made by `produce` (fused expert tensors).
  struct Item {
    std::string name;
    std::vector<SafetensorsModel::Ref> srcs;
    std::vector<int64_t> ne;  // GGUF order
    bool matrix = false;      // 2-D or 3-D: stored as the weight type (unless kept F32)
    bool keep_f32 = false;    // the routers: F32 whatever the output type, as llama.cpp's converter
    int64_t permute_head_dim = 0;
    std::optional<DType> fixed = std::nullopt;  // MXFP4 experts: kept in their type
    std::function<Status(uint8_t*, size_t, DType)> produce = nullptr;
    std::vector<SafetensorsModel::Ref> scales = {};  // FP8 sources: each one's scale tensor (else empty)
    std::vector<PackedMatrix> packed = {};           // GPTQ / AWQ / compressed-tensors sources (else empty)
    float shift = 0;                                 // added to every value (Gemma's norms: 1)
    // The GGUF type written: the fixed one, the weight type for matrices, else F32.
    DType out_type(DType wtype) const { return fixed ? *fixed : matrix && !keep_f32 ? wtype : DType::F32; }
  };

  explicit HfTensorPlan(const HfModel& m);
  Status add(const std::string& hf);
  Status add_kv_b(int64_t layer, const SafetensorsModel::Ref& ref, const std::string& hf, const std::string& where);
  Status add_fused(const HfFusedExpert& f, const SafetensorsModel::Ref& ref, const std::string& hf,
                   const std::string& where);
  Status add_mxfp4(const HfFusedExpert& f, const SafetensorsModel::Ref& ref, const std::string& hf,
                   const std::string& where);
  Result<std::vector<SafetensorsModel::Ref>> fp8_scale(const std::string& hf, const SafetensorsModel::Ref& ref,
                                                       const std::string& where) const;
  Status add_expert(const std::pair<std::string, int64_t>& part, const SafetensorsModel::Ref& ref,
                    const std::string& where);
  Status add_plain(const std::string& hf, const std::string& name, const SafetensorsModel::Ref& ref,
                   const std::string& where);
  // A packed integer matrix (module `base`, mapped as `name_base`: the text model's name of a
  // multimodal checkpoint's module), alone or as one expert of a stacked tensor.
  Status add_packed(const std::string& base, const std::string& name_base, const std::string& where);
  int64_t qk_permute_head_dim(const std::string& gg) const;
  // A GGUF tensor made from a fused expert tensor: once, and not also from per-expert ones.
  Status claim(const std::string& gguf_name, const std::string& where);
  Status finish();

  const HfModel* m_;
  std::vector<Item> items_;
  std::map<std::string, size_t> stacked_;                   // GGUF name of an expert tensor -> its item
  std::set<std::string> fused_;                             // GGUF names made from fused expert tensors
  std::map<std::string, std::vector<int64_t>> expected_;   // not seen yet: GGUF name -> HF shape
  std::set<StDType> weight_dtypes_;
  std::map<std::string, std::string> packed_parts_;        // packed tensors' modules -> a part's name (finish checks)
  std::set<std::string> packed_bases_;                     // modules whose packed weight was planned
  size_t skipped_vision_ = 0;                               // a multimodal checkpoint's vision tensors
  size_t skipped_nextn_ = 0;                                // glm4moe's NextN layer's tensors
};

}  // namespace tmill
