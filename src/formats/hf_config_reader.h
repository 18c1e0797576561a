// Private to src/formats: the checked field reads of config.json (hf_config.cpp) shared with the
// quantization_config parser (hf_quant_config.cpp). Every error names the file.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/result.h"
#include "formats/hf_config.h"

namespace tmill::detail {

class HfConfigReader {
 public:
  HfConfigReader(const nlohmann::json& j, const std::string& src) : j_(j), src_(src) {}

  Error err(const std::string& msg) const { return Error{fmt::format("{}: {}", src_, msg)}; }
  const nlohmann::json& root() const { return j_; }

  // Present, non-null field.
  const nlohmann::json* get(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  Result<int64_t> integer(const char* key, std::optional<int64_t> def, int64_t min, int64_t max) const {
    const nlohmann::json* v = get(key);
    if (!v) {
      if (def) return *def;
      return err(fmt::format("missing required field \"{}\"", key));
    }
    if (!v->is_number_integer()) return err(fmt::format("\"{}\" must be an integer, got {}", key, v->dump()));
    const int64_t i = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? INT64_MAX
                          : v->get<int64_t>();
    if (i < min || i > max) return err(fmt::format("\"{}\" = {} is out of range [{}, {}]", key, i, min, max));
    return i;
  }

  Result<double> number(const nlohmann::json& obj, const char* key, double def, const std::string& ctx) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_number()) return err(fmt::format("\"{}{}\" must be a number, got {}", ctx, key, it->dump()));
    const double d = it->get<double>();
    if (!std::isfinite(d) || d <= 0) return err(fmt::format("\"{}{}\" = {} must be positive", ctx, key, d));
    return d;
  }

  Result<bool> boolean(const char* key, bool def) const {
    const nlohmann::json* v = get(key);
    if (!v) return def;
    if (!v->is_boolean()) return err(fmt::format("\"{}\" must be true or false, got {}", key, v->dump()));
    return v->get<bool>();
  }

 private:
  const nlohmann::json& j_;
  const std::string& src_;
};

// config.json's quantization_config: fills `c` for the formats the converter reads (FP8, MXFP4 for
// gpt-oss, GPTQ, AWQ, compressed-tensors float8 or pack-quantized); an error naming the format (and
// what to do instead) for the others.
Status parse_quantization_config(const HfConfigReader& r, const nlohmann::json& q, const std::string& hf_arch, HfConfig* c);

// Gemma 2 / Gemma 3 (hf_config_gemma.cpp): prepare_gemma_config rewrites a Gemma config.json before
// it is read (Gemma3ForConditionalGeneration's text_config lifted, transformers' defaults filled,
// per-layer-type rope_parameters flattened); parse_gemma reads the Gemma fields into `c`.
bool is_gemma_arch(const std::string& hf_arch);

void prepare_gemma_config(nlohmann::json& j);
Status parse_gemma(const HfConfigReader& r, const nlohmann::json& j, HfConfig* c);

// Which layers slide (hf_config_families.cpp): config.json's layer_types ("sliding_attention" /
// "full_attention", one per layer; present), or every layer but every n-th.
Result<std::vector<bool>> read_layer_types(const HfConfigReader& r, int64_t n_layer);
std::vector<bool> sliding_but_every_nth(int64_t n_layer, int64_t n);

// partial_rotary_factor (at the top, else in transformers 5's rope_parameters; `def` when absent) and
// the rotary dimensions `dims_of(factor)` the family's converter makes of it, checked: even, 2 .. head_dim.
Result<int64_t> partial_rotary_dims(const HfConfigReader& r, const nlohmann::json& j, double def, int64_t head_dim,
                                    const std::function<int64_t(double)>& dims_of);

// LFM2 (hf_config_families.cpp): its config.json's own names for the common fields (norm_eps,
// theta, tie_embedding, block_ff_dim), as transformers' Lfm2Config reads them, and its defaults.
void prepare_lfm2_config(nlohmann::json& j);

// Granite, SmolLM3, OLMo 2 / OLMo 3 (hf_config_families.cpp): their own fields into `c` (nothing for
// the other families).
Status parse_family(const HfConfigReader& r, const nlohmann::json& j, HfConfig* c);

}  // namespace tmill::detail
