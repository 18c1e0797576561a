// Model hyper-parameters read from GGUF metadata, and the per-family description each
// architecture file (arch_*.cpp) registers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "formats/gguf.h"

namespace tmill {

enum class RopeLayout {
  Adjacent,  // rotate pairs (2i, 2i+1): GGUF "llama" (ggml rope mode NORM)
  NeoX,      // rotate halves (i, i + n_rot/2): qwen2/qwen3 (ggml rope mode NEOX)
};

enum class RopeScaling { None, Linear, Llama3 };

// What distinguishes one transformer family from another. Registered by src/model/arch_*.cpp.
struct ArchSpec {
  std::string name;          // general.architecture value ("llama", "qwen2", "qwen3")
  RopeLayout rope_layout;
  bool qkv_bias;             // q/k/v projections carry a bias (qwen2)
  bool qk_norm;              // RMSNorm over each q/k head before RoPE (qwen3)
};

const ArchSpec* find_arch(const std::string& name);
std::vector<std::string> known_archs();
void register_arch(const ArchSpec& spec);

struct ModelConfig {
  ArchSpec arch;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;       // hidden size
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;     // per head (key_length); usually n_embd / n_head
  int64_t n_ff = 0;         // feed-forward hidden size
  int64_t n_ctx_train = 0;  // trained context length
  int64_t n_rot = 0;        // dimensions RoPE rotates per head (<= head_dim)
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_scale_factor = 1.0f;  // linear scaling: positions are divided by this
  bool tied_output = false;        // output projection shares token_embd

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  int64_t gqa_group() const { return n_head / n_head_kv; }
};

// Reads and validates the hyper-parameters ({arch}.* keys). Errors name the missing/invalid key.
Result<ModelConfig> read_model_config(const GgufFile& file);

}  // namespace tmill
