// Apertus (GGUF "apertus": Swiss AI's Apertus-8B / 70B), as llama.cpp's apertus graph: per-head q/k
// RMSNorms (their biases, when the file has them, left out as llama.cpp leaves them) before NeoX RoPE
// (rope_freqs when present), an attn_output bias when present, and an ungated FFN down(xIELU(up x))
// with each layer's xIELU parameters from the global keys xielu.alpha_n / alpha_p / beta / eps (one
// value per layer, or one for all); the untied output.
#include <cmath>

#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
// ggml_compute_softplus_f32
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

Status read_apertus(const GgufFile& f, ModelConfig& c) {
  auto per_layer = [&](const char* key) -> Result<std::vector<float>> {
    const GgufValue* v = f.find(key);
    if (!v) return Error{fmt::format("missing metadata key '{}'", key)};
    std::vector<float> out;
    if (auto arr = v->as_f32_array()) out = *arr;
    else if (auto d = v->as_number()) out.assign(static_cast<size_t>(c.n_layer), static_cast<float>(*d));
    if (out.size() < static_cast<size_t>(c.n_layer))
      return Error{fmt::format("{} must hold a number per layer ({} layers)", key, c.n_layer)};
    for (float x : out)
      if (!std::isfinite(x)) return Error{fmt::format("{} holds {}", key, x)};
    return out;
  };
  TM_ASSIGN_OR_RETURN(const auto alpha_n, per_layer("xielu.alpha_n"));
  TM_ASSIGN_OR_RETURN(const auto alpha_p, per_layer("xielu.alpha_p"));
  TM_ASSIGN_OR_RETURN(const auto beta, per_layer("xielu.beta"));
  TM_ASSIGN_OR_RETURN(const auto eps, per_layer("xielu.eps"));
  c.xielu.resize(static_cast<size_t>(c.n_layer));
  for (size_t l = 0; l < c.xielu.size(); ++l)  // (as ggml_xielu folds them into its op parameters)
    c.xielu[l] = {beta[l] + softplus(alpha_n[l]), softplus(alpha_p[l]), beta[l], eps[l]};
  return {};
}
}  // namespace

ArchSpec arch_apertus() {
  ArchSpec s{"apertus", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.qk_norm_bias_unused = true;
  s.ffn_ungated = true;
  s.ffn_act = FfnActivation::XIelu;
  s.output_required = true;
  s.read_family = read_apertus;
  return s;
}
}  // namespace tmill
