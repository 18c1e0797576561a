// Gemma 3 text (GGUF "gemma3"; Gemma-3-1B and the text part of the larger ones): the gemma2 block
// (embeddings times sqrt(n_embd), NeoX RoPE, post-attention and post-FFN RMSNorm, GeGLU, tied
// output) with RMSNorm over each query and key head (attn_q_norm / attn_k_norm) before RoPE and no
// attention soft-capping. With attention.sliding_window set, five sliding layers to one global
// (pattern 6: layers 5, 11, ... are global); the sliding layers rotate with base
// rope.freq_base_swa (default 10000) and no scaling, the global ones with rope.freq_base and the
// file's rope scaling (linear x8 on the 4B+ models). Logits are soft-capped only when the file has
// final_logit_softcapping. Queries scaled by 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the
// 62-layer 27B, as llama.cpp).
// EmbeddingGemma (GGUF "gemma-embedding"): the same layers with bidirectional attention
// (ArchSpec::bidirectional; its sliding layers see window / 2 positions on either side), queries
// always scaled by 1/sqrt(head_dim), the sliding window required; an embedding model only
// (model/decoder_embedder.cpp: mean pooling, then the optional dense_2 / dense_3 projections).
#include <cmath>

#include "model/config.h"

namespace tmill {
namespace {
// What gemma3 and gemma-embedding share: the embedding scale, the windows (five of six layers) and the
// sliding layers' RoPE base. Returns whether the file has windows.
Result<bool> read_gemma3_layers(const GgufFile& f, ModelConfig& c) {
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  TM_ASSIGN_OR_RETURN(const bool swa, read_sliding_window(f, c, 0, 6));
  TM_ASSIGN_OR_RETURN(const float theta_swa, read_family_float(f, c, "rope.freq_base_swa", 10000.0f));
  if (swa) set_sliding_rope(c, theta_swa, 1.0f);
  return swa;
}

Status read_gemma3(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(c.final_softcap, read_family_float(f, c, "final_logit_softcapping", 0.0f));
  if (c.n_layer == 62) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
  TM_ASSIGN_OR_RETURN(const bool swa, read_gemma3_layers(f, c));
  (void)swa;  // (gemma3: windows are optional)
  return {};
}

Status read_gemma_embedding(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(const bool swa, read_gemma3_layers(f, c));
  if (!swa) return Error{"gemma-embedding: metadata key 'gemma-embedding.attention.sliding_window' is missing or 0"};
  return {};
}
}  // namespace

ArchSpec arch_gemma3() {
  ArchSpec s{"gemma3", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.ffn_act = FfnActivation::GeluTanh;
  s.post_norms = true;
  s.read_family = read_gemma3;
  return s;
}

ArchSpec arch_gemma_embedding() {
  ArchSpec s = arch_gemma3();
  s.name = "gemma-embedding";
  s.bidirectional = true;
  s.read_family = read_gemma_embedding;
  return s;
}
}  // namespace tmill
