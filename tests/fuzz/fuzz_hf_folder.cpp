// fuzz-deps: convert
// libFuzzer target: a Hugging Face folder converted in memory (convert/hf_model.h), its safetensors
// being the input bytes after the first; the first byte picks config.json among a plain one-layer
// llama, the quantized checkpoints the converter reads (GPTQ 4- and 8-bit, AWQ, compressed-tensors
// pack-quantized, FP8 with blocks, INT8) and a Gemma 3: the packed integers, their scales, zero points, g_idx and shapes
// are all attacker-controlled. Checks: no crash or sanitizer report; a refusal names something; a
// converted file re-parses, with every tensor inside it.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "convert/hf_model.h"
#include "formats/gguf.h"

using namespace tmill;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// One layer, hidden 32, 2 heads of 16, 1 kv head, FFN 32, vocab 8: matrices of whole Q4 blocks.
const char* kBase = R"("architectures": ["LlamaForCausalLM"], "hidden_size": 32, "intermediate_size": 32,
  "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 8,
  "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": false)";
const char* kQuant[] = {
    "",
    R"(, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 16, "checkpoint_format": "gptq"})",
    R"(, "quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": -1, "checkpoint_format": "gptq_v2"})",
    R"(, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm"})",
    R"(, "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups":
       {"group_0": {"weights": {"type": "int", "num_bits": 4, "strategy": "group", "group_size": 32}}}})",
    R"(, "quantization_config": {"quant_method": "fp8", "weight_block_size": [16, 16]})",
    R"(, "quantization_config": {"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups":
       {"group_0": {"weights": {"type": "int", "num_bits": 8, "strategy": "channel", "symmetric": true}}}})",
};

// Config 7: a one-layer Gemma 3 of the same size (norms +1, post norms, q/k norms, its defaults filled).
const char* kGemma = R"("architectures": ["Gemma3ForCausalLM"], "hidden_size": 32, "intermediate_size": 32,
  "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 8,
  "sliding_window": 4, "rope_local_base_freq": 10000, "query_pre_attn_scalar": 16)";

const std::string& folder() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/fuzz-hf-folder-XXXXXX";
    check(mkdtemp(tmpl) != nullptr);
    return std::string(tmpl);
  }();
  return dir;
}

void write(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  check(static_cast<bool>(f));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1 << 20)) return 0;
  constexpr size_t kConfigs = sizeof(kQuant) / sizeof(kQuant[0]) + 1;
  const size_t pick = (data[0] & 0x7f) % kConfigs;
  const std::string cfg = pick == kConfigs - 1 ? std::string("{") + kGemma + "}"
                                               : std::string("{") + kBase + kQuant[pick] + "}";
  write(folder() + "/config.json", cfg.data(), cfg.size());
  write(folder() + "/model.safetensors", data + 1, size - 1);
  auto m = HfModel::open(folder());
  if (!m.ok()) {
    check(!m.error().empty());
    return 0;
  }
  GgufWriter w;
  HfConvertOptions o;
  o.outtype = data[0] & 0x80 ? "f16" : "auto";
  if (Status st = add_hf_model_to_gguf(*m, o, w); !st.ok()) {
    check(!st.error().empty());
    return 0;
  }
  std::vector<uint8_t> out;
  const Status st = w.write_to([&out](const void* p, size_t n) -> Status {
    out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return {};
  });
  if (!st.ok()) {
    check(!st.error().empty());
    return 0;
  }
  auto f = GgufFile::parse(out.data(), out.size());
  check(f.ok());
  for (const GgufTensorInfo& t : f->tensors())
    check(t.data >= out.data() && t.data + t.nbytes <= out.data() + out.size());
  return 0;
}
