// The model shapes `tokenmill dummy` knows: real models' dimensions (values from their
// config.json), by family, plus tiny ones for tests ("tiny-llama", "tiny-qwen2", "tiny-gemma3", ...).
#include "convert/dummy.h"

#include <cmath>
#include <utility>

namespace tmill {
namespace {

// Granite's four scalars (embedding, residual, attention, logit scales) on a shape.
ModelShape granite(ModelShape s, float embd, float resid, float attn, float logit) {
  s.embd_scale = embd, s.residual_scale = resid, s.attn_scale = attn, s.logit_scale = logit;
  return s;
}

// Llama family: Llama 2/3, TinyLlama.
std::vector<ModelShape> llama_shapes() {
  ModelShape l32{"llama-3.2-1b", "llama", 128256, 2048, 16, 32, 8, 64, 8192, 131072, 500000.0f, 1e-5f, true};
  l32.rope_llama3_factor = 32;
  l32.rope_low = 1;
  l32.rope_high = 4;
  l32.rope_orig_ctx = 8192;
  return {
      l32,
      {"llama-3-8b", "llama", 128256, 4096, 32, 32, 8, 128, 14336, 8192, 500000.0f, 1e-5f, false},
      {"llama-2-7b", "llama", 32000, 4096, 32, 32, 32, 128, 11008, 4096, 10000.0f, 1e-5f, false},
      {"tinyllama-1.1b", "llama", 32000, 2048, 22, 32, 4, 64, 5632, 2048, 10000.0f, 1e-5f, false},
      {"tiny-llama", "llama", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false},
  };
}

// Mistral 7B v0.1 (llama with a 4096-position sliding window on every layer), and a tiny one whose
// window (8) the tests' prompts exceed.
std::vector<ModelShape> mistral_shapes() {
  ModelShape m{"mistral-7b", "llama", 32000, 4096, 32, 32, 8, 128, 14336, 32768, 10000.0f, 1e-5f, false};
  m.n_swa = 4096;
  ModelShape tiny{"tiny-mistral", "llama", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false};
  tiny.n_swa = 8;
  // tiny llama with YaRN x4 over an original context of 32 (the tests run past it)
  ModelShape yarn{"tiny-llama-yarn", "llama", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false};
  yarn.rope_scaling = "yarn";
  yarn.rope_factor = 4;
  yarn.rope_orig_ctx = 32;
  return {m, tiny, yarn};
}

// Gemma 2 / Gemma 3 text: tied output, head_dim 256, sliding windows (gemma2 every other layer,
// gemma3 five of six; gemma3's sliding layers rotate with base 10000, its 4B's global ones with a
// linear x8 scaling), gemma2's soft-capping.
std::vector<ModelShape> gemma_shapes() {
  ModelShape g2{"gemma-2-2b", "gemma2", 256000, 2304, 26, 8, 4, 256, 9216, 8192, 10000.0f, 1e-6f, true};
  g2.n_swa = 4096;
  g2.attn_softcap = 50;
  g2.final_softcap = 30;
  ModelShape g31{"gemma-3-1b", "gemma3", 262144, 1152, 26, 4, 1, 256, 6912, 32768, 1000000.0f, 1e-6f, true};
  g31.n_swa = 512;
  g31.rope_theta_swa = 10000;
  ModelShape g34{"gemma-3-4b", "gemma3", 262208, 2560, 34, 8, 4, 256, 10240, 131072, 1000000.0f, 1e-6f, true};
  g34.n_swa = 1024;
  g34.rope_theta_swa = 10000;
  g34.rope_scaling = "linear";
  g34.rope_factor = 8;
  // tiny: windows of 8 positions; gemma2 3 layers (0 and 2 slide), gemma3 7 layers (5 is global,
  // scaled x2, base 1e6; the sliding ones base 10000)
  ModelShape t2{"tiny-gemma2", "gemma2", 512, 64, 3, 4, 2, 32, 160, 256, 10000.0f, 1e-6f, true};
  t2.n_swa = 8;
  t2.attn_softcap = 50;
  t2.final_softcap = 30;
  ModelShape t3{"tiny-gemma3", "gemma3", 512, 64, 7, 4, 2, 32, 160, 256, 1000000.0f, 1e-6f, true};
  t3.n_swa = 8;
  t3.rope_theta_swa = 10000;
  t3.rope_scaling = "linear";
  t3.rope_factor = 2;
  // EmbeddingGemma (google/embeddinggemma-300m): Gemma 3's layers, bidirectional, mean pooling, then
  // 768 -> 3072 -> 768. tiny: a window of 8 (4 positions either side), layer 5 global.
  ModelShape ge{"embeddinggemma-300m", "gemma-embedding", 262144, 768, 24, 3, 1, 256, 1152, 2048, 1000000.0f, 1e-6f, true};
  ge.n_swa = 512;
  ge.rope_theta_swa = 10000;
  ge.pooling = "mean";
  ge.n_embd_dense = 3072;
  ModelShape te{"tiny-gemma-embedding", "gemma-embedding", 512, 64, 7, 4, 2, 32, 160, 256, 1000000.0f, 1e-6f, true};
  te.n_swa = 8;
  te.rope_theta_swa = 10000;
  te.pooling = "mean";
  te.n_embd_dense = 96;
  ModelShape ten = te;  // as llama.cpp's converter writes it without --sentence-transformers-dense-modules
  ten.name = "tiny-gemma-embedding-nodense";
  ten.n_embd_dense = 0;
  // Gemma (the first generation): head_dim 256 on both (wider than n_embd / n_head on the 7B)
  ModelShape g1{"gemma-2b", "gemma", 256000, 2048, 18, 8, 1, 256, 16384, 8192, 10000.0f, 1e-6f, true};
  ModelShape g7{"gemma-7b", "gemma", 256000, 3072, 28, 16, 16, 256, 24576, 8192, 10000.0f, 1e-6f, true};
  ModelShape t1{"tiny-gemma", "gemma", 512, 64, 2, 4, 2, 32, 160, 256, 10000.0f, 1e-6f, true};
  return {g2, g31, g34, t2, t3, ge, te, ten, g1, g7, t1};
}

// IBM Granite 3.3 (granite: the llama block with embedding / residual / attention / logit scales from
// config.json's embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling),
// SmolLM3 (llama with NoPE on every fourth layer), OLMo 2 and OLMo 3 (olmo2: post-norms only, q/k
// norms over the whole projection; OLMo 3 slides three layers of four over 4096 positions, YaRN x8
// over 8192 on the global ones), EXAONE 3.5 / 4.0, ERNIE 4.5 (dense), GLM-4 (dense: sandwich norms,
// q/k/v biases, fused gate/up, half-head RoPE).
ModelShape rope_dims(ModelShape s, int64_t n_rot) {
  s.n_rot = n_rot;
  return s;
}

// LFM2's attention layers (the rest are short convolutions)
ModelShape lfm2(ModelShape s, std::vector<int64_t> attn_layers) {
  s.attn_layers = std::move(attn_layers);
  return s;
}

// LFM2 MoE: the attention layers, the experts and the leading dense layers
ModelShape lfm2moe(ModelShape s, std::vector<int64_t> attn_layers, int64_t n_expert, int64_t used, int64_t ff_exp,
                   int64_t dense_lead) {
  s = lfm2(std::move(s), std::move(attn_layers));
  s.n_expert = n_expert, s.n_expert_used = used, s.n_ff_exp = ff_exp, s.n_dense_lead = dense_lead;
  return s;
}

// Granite 4.0-H (granitehybrid): granite's scalars, the attention layers (the rest Mamba-2 mixers), the
// mixers' state size, heads and groups, and experts with a shared one (0 experts: a dense FFN)
ModelShape granite_h(ModelShape s, std::vector<int64_t> attn_layers, int64_t d_state, int64_t ssm_heads, int64_t groups,
                     int64_t n_expert, int64_t used, int64_t ff_shexp) {
  s = granite(std::move(s), 12.0f, 0.22f, 0.0078125f, 6.0f);
  s.attn_layers = std::move(attn_layers);
  s.ssm_d_state = d_state, s.ssm_n_head = ssm_heads, s.ssm_n_group = groups;
  s.n_expert = n_expert, s.n_expert_used = used, s.n_ff_shexp = ff_shexp;
  return s;
}

// Qwen3.5 (qwen35, qwen35moe): the rotated dimensions and the gated delta nets' head size, value and key
// heads (every fourth layer attention)
ModelShape qwen35(ModelShape s, int64_t n_rot, int64_t d_state, int64_t v_heads, int64_t k_heads) {
  s.n_rot = n_rot;
  s.ssm_d_state = d_state, s.ssm_n_head = v_heads, s.ssm_n_group = k_heads;
  return s;
}

// Cohere's: the logit scale (both), the sliding window (cohere2)
ModelShape logits(ModelShape s, float scale) {
  s.logit_scale = scale;
  return s;
}
ModelShape cohere2(ModelShape s, int64_t window, float scale) {
  s.n_swa = window;
  return logits(s, scale);
}

std::vector<ModelShape> more_shapes() {
  ModelShape o3{"olmo-3-7b", "olmo2", 100278, 4096, 32, 32, 32, 128, 11008, 65536, 500000.0f, 1e-6f, false};
  o3.n_swa = 4096;
  o3.rope_scaling = "yarn";
  o3.rope_factor = 8;
  o3.rope_orig_ctx = 8192;
  // EXAONE 3.5 2.4B and EXAONE 4.0 1.2B: Llama 3 rope scaling (rope_freqs.weight); the 64-layer
  // EXAONE 4.0 32B alone slides (4096 positions, three layers of four, NoPE on the global ones): its
  // tiny stand-in has 64 narrow layers and a window of 8
  ModelShape e35{"exaone-3.5-2.4b", "exaone", 102400, 2560, 30, 32, 8, 80, 7168, 32768, 1000000.0f, 1e-5f, true};
  e35.rope_llama3_factor = 8, e35.rope_orig_ctx = 8192;
  ModelShape e4{"exaone-4.0-1.2b", "exaone4", 102400, 2048, 30, 32, 8, 64, 4096, 65536, 1000000.0f, 1e-5f, true};
  e4.rope_llama3_factor = 16, e4.rope_orig_ctx = 8192;
  // GLM-4-9B-0414: RoPE over half of each head
  ModelShape g49{"glm-4-9b", "glm4", 151552, 4096, 40, 32, 2, 128, 13696, 32768, 10000.0f, 1e-5f, false};
  g49.n_rot = 64;
  ModelShape tg4{"tiny-glm4", "glm4", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false};
  tg4.n_rot = 8;
  // tiny Mistral 3: YaRN x4 over 64 positions with its own betas (4 and 2: both move YaRN's ramp from
  // the defaults' for 32 rotated dimensions) and log multiplier, and the attention temperature (0.1)
  // past every 64 positions
  ModelShape tm3{"tiny-mistral3", "mistral3", 512, 64, 2, 4, 2, 32, 160, 256, 10000.0f, 1e-5f, false};
  tm3.rope_scaling = "yarn", tm3.rope_factor = 4, tm3.rope_orig_ctx = 64;
  tm3.yarn_beta_fast = 4, tm3.yarn_beta_slow = 2, tm3.yarn_log_mul = 1, tm3.attn_temp_scale = 0.1f;
  ModelShape to4{"tiny-exaone4-swa", "exaone4", 512, 32, 64, 2, 1, 16, 64, 256, 1000000.0f, 1e-5f, true};
  to4.n_swa = 8;
  // tiny OLMo 3: window 8, layers 0-2 slide and 3 is global, YaRN x2 over 32 positions
  ModelShape to3{"tiny-olmo3", "olmo2", 512, 64, 4, 4, 2, 16, 160, 256, 500000.0f, 1e-6f, false};
  to3.n_swa = 8;
  to3.rope_scaling = "yarn";
  to3.rope_factor = 2;
  to3.rope_orig_ctx = 32;
  return {
      granite({"granite-3.3-2b", "granite", 49159, 2048, 40, 32, 8, 64, 8192, 131072, 10000000.0f, 1e-5f, true}, 12.0f,
              0.22f, 0.015625f, 8.0f),
      granite({"granite-3.3-8b", "granite", 49159, 4096, 40, 32, 8, 128, 12800, 131072, 10000000.0f, 1e-5f, true}, 12.0f,
              0.22f, 0.0078125f, 16.0f),
      granite({"tiny-granite", "granite", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false}, 6.0f, 0.5f, 0.1f, 4.0f),
      {"smollm3-3b", "smollm3", 128256, 2048, 36, 16, 4, 128, 11008, 65536, 5000000.0f, 1e-6f, true},
      {"tiny-smollm3", "smollm3", 512, 64, 4, 4, 2, 16, 160, 256, 10000.0f, 1e-6f, true},
      {"olmo-2-1b", "olmo2", 100352, 2048, 16, 16, 16, 128, 8192, 4096, 500000.0f, 1e-6f, false},
      {"olmo-2-7b", "olmo2", 100352, 4096, 32, 32, 32, 128, 11008, 4096, 500000.0f, 1e-6f, false},
      o3,
      {"tiny-olmo2", "olmo2", 512, 64, 2, 4, 2, 16, 160, 256, 500000.0f, 1e-6f, false},
      to3,
      e35,
      {"tiny-exaone", "exaone", 512, 64, 2, 4, 2, 16, 160, 256, 1000000.0f, 1e-5f, false},
      e4,
      {"tiny-exaone4", "exaone4", 512, 64, 2, 4, 2, 16, 160, 256, 1000000.0f, 1e-5f, true},
      to4,
      {"ernie-4.5-0.3b", "ernie4_5", 103424, 1024, 18, 16, 2, 64, 3072, 131072, 500000.0f, 1e-5f, true},
      {"tiny-ernie4_5", "ernie4_5", 512, 64, 2, 4, 2, 16, 160, 256, 500000.0f, 1e-5f, true},
      // Command R 7B (cohere2: windows of 4096 on three layers of four, the fourth global without RoPE),
      // Aya Expanse 8B (command-r); tiny forms with logit scale 0.25
      cohere2({"command-r7b", "cohere2", 256000, 4096, 32, 32, 8, 128, 14336, 131072, 50000.0f, 1e-5f, true}, 4096, 0.25f),
      logits({"aya-expanse-8b", "command-r", 256000, 4096, 32, 32, 8, 128, 14336, 8192, 10000.0f, 1e-5f, true}, 0.125f),
      logits({"tiny-command-r", "command-r", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, true}, 0.25f),
      cohere2({"tiny-cohere2", "cohere2", 512, 64, 4, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, true}, 8, 0.25f),
      // StarCoder2-7B (LayerNorms with biases, biases everywhere, an ungated GELU FFN) and its tiny form
      {"starcoder2-7b", "starcoder2", 49152, 4608, 32, 36, 4, 128, 18432, 16384, 1000000.0f, 1e-5f, false},
      {"tiny-starcoder2", "starcoder2", 512, 64, 2, 4, 2, 16, 160, 256, 100000.0f, 1e-5f, false},
      // StableLM 2 1.6B: LayerNorms with biases, q/k/v biases, RoPE over a quarter of each head
      rope_dims({"stablelm-2-1.6b", "stablelm", 100352, 2048, 24, 32, 32, 64, 5632, 4096, 10000.0f, 1e-5f, false}, 16),
      rope_dims({"tiny-stablelm", "stablelm", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, false}, 4),
      // Phi-2: the parallel block, RoPE over 32 of 80 dimensions, an output bias
      rope_dims({"phi-2", "phi2", 51200, 2560, 32, 32, 32, 80, 10240, 2048, 10000.0f, 1e-5f, false}, 32),
      rope_dims({"tiny-phi2", "phi2", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, false}, 8),
      // Arcee AFM-4.5B (arcee: the llama block with an ungated ReLU-squared FFN) and a tiny form
      {"afm-4.5b", "arcee", 128004, 2560, 36, 20, 4, 128, 18432, 65536, 10000.0f, 1e-5f, false},
      {"tiny-arcee", "arcee", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false},
      // Apertus-8B (apertus: q/k norms, an ungated xIELU FFN) and a tiny form
      {"apertus-8b", "apertus", 131072, 4096, 32, 32, 8, 128, 21504, 65536, 12000000.0f, 1e-5f, false},
      {"tiny-apertus", "apertus", 512, 64, 3, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false},
      // Hunyuan-7B (hunyuan-dense: q/k norms after RoPE; RoPE's base with HunYuan's NTK alpha 1000 applied,
      // as the converter writes it) and a tiny form
      {"hunyuan-7b", "hunyuan-dense", 128167, 4096, 32, 32, 8, 128, 14336, 262144, 11158840.0f, 1e-5f, true},
      {"tiny-hunyuan-dense", "hunyuan-dense", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, true},
      // LFM2 1.2B / 350M (HF full_attn_idxs 2, 5, 8, 10, 12, 14; the other ten layers short convolutions
      // of 3 taps) and a tiny form whose first, middle and last layers are convolutions
      lfm2({"lfm2-1.2b", "lfm2", 65536, 2048, 16, 32, 8, 64, 8192, 128000, 1000000.0f, 1e-5f, true}, {2, 5, 8, 10, 12, 14}),
      lfm2({"lfm2-350m", "lfm2", 65536, 1024, 16, 16, 8, 64, 4608, 128000, 1000000.0f, 1e-5f, true}, {2, 5, 8, 10, 12, 14}),
      lfm2({"tiny-lfm2", "lfm2", 512, 64, 5, 4, 2, 16, 160, 256, 1000000.0f, 1e-5f, true}, {1, 3}),
      // LFM2-8B-A1B: 32 experts of 1792 rows, 4 per token, after 2 dense layers (attention on 6 of 24
      // layers, as its layer_types); a tiny form with 8 experts, 2 per token, after 1 dense layer
      lfm2moe({"lfm2-8b-a1b", "lfm2moe", 65536, 2048, 24, 32, 8, 64, 7168, 128000, 1000000.0f, 1e-5f, true},
              {2, 6, 10, 14, 18, 21}, 32, 4, 1792, 2),
      lfm2moe({"tiny-lfm2moe", "lfm2moe", 512, 64, 5, 4, 2, 16, 160, 256, 1000000.0f, 1e-5f, true}, {1, 3}, 8, 2, 96, 1),
      // Granite 4.0-H-Tiny (7B-A1B: 4 attention layers of 40, 64 experts of 512 rows, 6 per token, a shared
      // expert of 1024; mixers of 48 heads x 64 with a state of 128, one group) and H-Micro (dense, 64
      // mixer heads; its attention layers' places here are H-Tiny's), NoPE; tiny forms, dense and with experts, whose first, middle and last layers
      // are mixers (2 groups)
      granite_h({"granite-4.0-h-tiny", "granitehybrid", 100352, 1536, 40, 12, 4, 128, 512, 131072, 10000.0f, 1e-5f, true},
                {5, 15, 25, 35}, 128, 48, 1, 64, 6, 1024),
      granite_h({"granite-4.0-h-micro", "granitehybrid", 100352, 2048, 40, 32, 8, 64, 8192, 131072, 10000.0f, 1e-5f, true},
                {5, 15, 25, 35}, 128, 64, 1, 0, 0, 0),
      // (tiny: scalars under which the layers weigh in, unlike the released 12 / 0.22)
      granite(granite_h({"tiny-granitehybrid", "granitehybrid", 512, 64, 5, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, true},
                        {1, 3}, 16, 8, 2, 0, 0, 0), 1.5f, 0.8f, 0.2f, 3.0f),
      // Bamba-9B's form of the file (granitehybrid with RoPE on its attention layers), tiny
      [] {
        ModelShape m = granite(granite_h({"tiny-bamba", "granitehybrid", 512, 64, 5, 4, 2, 16, 160, 256, 10000.0f, 1e-5f,
                                          true}, {1, 3}, 16, 8, 2, 0, 0, 0), 1.5f, 0.8f, 0.2f, 3.0f);
        m.ssm_rope = true;
        return m;
      }(),
      granite(granite_h({"tiny-granitehybrid-moe", "granitehybrid", 512, 64, 5, 4, 2, 16, 64, 256, 10000.0f, 1e-5f, true},
                        {1, 3}, 16, 8, 2, 8, 2, 96), 1.5f, 0.8f, 0.2f, 3.0f),
      // Nemotron-H tiny form: mixers, attention and MLPs in the order its pattern names (mixers of 8 heads
      // in 2 groups with a state of 16); Nemotron Nano 2 9B's shape (56 layers of hybrid_override_pattern,
      // mixers of 128 heads x 80 in 8 groups) is not written here: its inner width is not 2 x n_embd
      [] {
        ModelShape m{"tiny-nemotron-h", "nemotron_h", 512, 64, 7, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false};
        m.layer_pattern = "M-M*-M-";
        m.ssm_d_state = 16, m.ssm_n_head = 8, m.ssm_n_group = 2;
        return m;
      }(),
      // Nemotron 3 tiny form: mixers, attention and expert layers (8 ungated experts of 32 rows, 2 per
      // token, a shared expert of 48)
      [] {
        ModelShape m{"tiny-nemotron-h-moe", "nemotron_h_moe", 512, 64, 7, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false};
        m.layer_pattern = "MEM*EME";
        m.ssm_d_state = 16, m.ssm_n_head = 8, m.ssm_n_group = 2;
        m.n_expert = 8, m.n_expert_used = 2, m.n_ff_exp = 32, m.n_ff_shexp = 48;
        return m;
      }(),
      // Qwen3.5-0.8B (24 layers, every fourth gated attention: 8 heads of 256 over 2 KV heads, 64 of them
      // rotated, M-RoPE sections 11/11/10; tied output). Its delta nets' heads (16 key and 16 value heads
      // of 128) and FFN width (3584) are assumed, not read from its config.json.
      qwen35({"qwen3.5-0.8b", "qwen35", 248320, 1024, 24, 8, 2, 256, 3584, 262144, 10000000.0f, 1e-6f, true}, 64, 128,
             16, 16),
      // Qwen3.5 tiny forms: layers 0-2 gated delta nets (4 value heads over 2 key heads of 16), layer 3
      // gated attention rotating 8 of 16 dimensions; with 8 experts (2 per token) and a shared expert
      qwen35({"tiny-qwen35", "qwen35", 512, 64, 4, 4, 2, 16, 160, 256, 10000000.0f, 1e-6f, true}, 8, 16, 4, 2),
      [] {
        ModelShape m = qwen35({"tiny-qwen35moe", "qwen35moe", 512, 64, 4, 4, 2, 16, 160, 256, 10000000.0f, 1e-6f, true},
                              8, 16, 4, 2);
        m.n_expert = 8, m.n_expert_used = 2, m.n_ff_exp = 32, m.n_ff_shexp = 48;
        return m;
      }(),
      // Qwen3-Next-80B-A3B (qwen3next): 48 layers, every fourth gated attention (16 heads of 256 over 2 KV
      // heads, 64 dimensions rotated), delta nets of 32 value heads over 16 key heads of 128, 512 experts of
      // 512 rows (10 per token) beside a shared expert of 512; and its tiny forms, tiny-qwen35moe's sizes
      // (4 value heads over 2 key heads, so the grouping tells), with attn_qkv / attn_gate or the older
      // files' one ssm_in
      [] {
        ModelShape m = qwen35({"qwen3-next-80b-a3b", "qwen3next", 151936, 2048, 48, 16, 2, 256, 5120, 262144, 10000000.0f,
                               1e-6f, false}, 64, 128, 32, 16);
        m.n_expert = 512, m.n_expert_used = 10, m.n_ff_exp = 512, m.n_ff_shexp = 512;
        return m;
      }(),
      [] {
        ModelShape m = qwen35({"tiny-qwen3next", "qwen3next", 512, 64, 4, 4, 2, 16, 160, 256, 10000000.0f, 1e-6f, true},
                              8, 16, 4, 2);
        m.n_expert = 8, m.n_expert_used = 2, m.n_ff_exp = 32, m.n_ff_shexp = 48;
        return m;
      }(),
      [] {
        ModelShape m = qwen35({"tiny-qwen3next-legacy", "qwen3next", 512, 64, 4, 4, 2, 16, 160, 256, 10000000.0f, 1e-6f,
                               true}, 8, 16, 4, 2);
        m.n_expert = 8, m.n_expert_used = 2, m.n_ff_exp = 32, m.n_ff_shexp = 48;
        m.gdn_legacy_in = true;
        return m;
      }(),
      // Falcon-H1 0.5B and 7B (falcon-h1): attention and a Mamba-2 mixer in every layer -- 0.5B: 8 heads of
      // 64 over 2, mixers 1536 wide (24 heads of 64, a state of 128, one group); 7B: 12 heads of 128 over
      // 2, mixers 3072 wide (24 heads of 128, a state of 256) --; tiny forms with mixers 96 wide (6 heads
      // of 16, 2 groups, a state of 16), with and without the mixers' grouped norm
      [] {
        ModelShape m{"falcon-h1-0.5b", "falcon-h1", 32784, 1024, 36, 8, 2, 64, 2048, 16384, 100000000000.0f, 1e-5f, false};
        m.ssm_d_inner = 1536, m.ssm_n_head = 24, m.ssm_d_state = 128, m.ssm_n_group = 1;
        return m;
      }(),
      [] {
        ModelShape m{"falcon-h1-7b", "falcon-h1", 130049, 3072, 44, 12, 2, 128, 12288, 262144, 100000000000.0f, 1e-5f, false};
        m.ssm_d_inner = 3072, m.ssm_n_head = 24, m.ssm_d_state = 256, m.ssm_n_group = 1;
        return m;
      }(),
      [] {
        ModelShape m{"tiny-falcon-h1", "falcon-h1", 512, 64, 3, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false};
        m.ssm_d_inner = 96, m.ssm_n_head = 6, m.ssm_d_state = 16, m.ssm_n_group = 2;
        return m;
      }(),
      [] {
        ModelShape m{"tiny-falcon-h1-nonorm", "falcon-h1", 512, 64, 3, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false};
        m.ssm_d_inner = 96, m.ssm_n_head = 6, m.ssm_d_state = 16, m.ssm_n_group = 2, m.ssm_no_norm = true;
        return m;
      }(),
      // MiniCPM-2B and MiniCPM4-8B (minicpm: the llama block with muP's scalars -- scale_emb 12, scale_depth
      // 1.4 over sqrt(n_layer), logits over hidden_size / 256; MiniCPM4's LongRoPE left out), a tiny form
      // and a tiny MiniCPM-MoE (8 experts, 2 per token)
      granite({"minicpm-2b", "minicpm", 122753, 2304, 40, 36, 36, 64, 5760, 4096, 10000.0f, 1e-5f, true}, 12.0f,
              1.4f / std::sqrt(40.0f), 0.0f, 9.0f),
      granite({"minicpm4-8b", "minicpm", 73448, 4096, 32, 32, 2, 128, 16384, 32768, 10000.0f, 1e-6f, false}, 12.0f,
              1.4f / std::sqrt(32.0f), 0.0f, 16.0f),
      granite({"tiny-minicpm", "minicpm", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, true}, 12.0f,
              1.4f / std::sqrt(2.0f), 0.0f, 0.25f),
      [] {
        ModelShape m = granite({"tiny-minicpm-moe", "minicpm", 512, 64, 2, 4, 2, 16, 64, 256, 10000.0f, 1e-5f, true},
                               12.0f, 1.4f / std::sqrt(2.0f), 0.0f, 0.25f);
        m.n_expert = 8, m.n_expert_used = 2;
        return m;
      }(),
      // InternLM2.5-7B (internlm2: the llama block, an untied output) and its tiny form
      {"internlm2.5-7b", "internlm2", 92544, 4096, 32, 32, 8, 128, 14336, 32768, 1000000.0f, 1e-5f, false},
      {"tiny-internlm2", "internlm2", 512, 64, 2, 4, 2, 16, 160, 256, 1000000.0f, 1e-5f, false},
      // Attention-free stacks (their attention fields unused): Mamba-130M and Falcon-Mamba-7B (mamba: d_state
      // 16, dt's rank n_embd / 16; Falcon-Mamba's RMS norms on dt, B, C), Mamba-2-130M and
      // Mamba-Codestral-7B (mamba2: 24 heads of 64 / 128 heads of 64 in 8 groups, d_state 128); tiny forms
      // with the inner width 2 n_embd (Mamba-2: 8 heads, 2 groups, d_state 16)
      [] {
        ModelShape m{"mamba-130m", "mamba", 50280, 768, 24, 1, 1, 2, 1, 1048576, 10000.0f, 1e-5f, true};
        m.ssm_d_state = 16, m.ssm_dt_rank = 48;
        return m;
      }(),
      [] {
        ModelShape m{"falcon-mamba-7b", "mamba", 65024, 4096, 64, 1, 1, 2, 1, 1048576, 10000.0f, 1e-5f, false};
        m.ssm_d_state = 16, m.ssm_dt_rank = 256, m.ssm_dt_b_c_rms = true;
        return m;
      }(),
      [] {
        ModelShape m{"mamba2-130m", "mamba2", 50288, 768, 24, 1, 1, 2, 1, 1048576, 10000.0f, 1e-5f, true};
        m.ssm_d_state = 128, m.ssm_n_head = 24, m.ssm_n_group = 1;
        return m;
      }(),
      [] {
        ModelShape m{"mamba-codestral-7b", "mamba2", 32768, 4096, 64, 1, 1, 2, 1, 1048576, 10000.0f, 1e-5f, false};
        m.ssm_d_state = 128, m.ssm_n_head = 128, m.ssm_n_group = 8;
        return m;
      }(),
      [] {
        ModelShape m{"tiny-mamba", "mamba", 512, 64, 3, 1, 1, 2, 1, 256, 10000.0f, 1e-5f, true};
        m.ssm_d_state = 16;
        return m;
      }(),
      [] {
        ModelShape m{"tiny-falcon-mamba", "mamba", 512, 64, 3, 1, 1, 2, 1, 256, 10000.0f, 1e-5f, false};
        m.ssm_d_state = 16, m.ssm_dt_b_c_rms = true;
        return m;
      }(),
      [] {
        ModelShape m{"tiny-mamba2", "mamba2", 512, 64, 3, 1, 1, 2, 1, 256, 10000.0f, 1e-5f, true};
        m.ssm_d_state = 16, m.ssm_n_head = 8, m.ssm_n_group = 2;
        return m;
      }(),
      // Jamba Mini 1.7 (jamba: Mamba-1 mixers with attention on every 8th layer from layer 4, 16 experts (2 per
      // token) on every other layer from layer 1, dt's rank 256) and a tiny form: 4 layers, attention on
      // layer 2, 4 experts on layers 1 and 3
      [] {
        ModelShape m{"jamba-mini-1.7", "jamba", 65536, 4096, 32, 32, 8, 128, 14336, 262144, 10000.0f, 1e-6f, false};
        m.attn_layers = {4, 12, 20, 28};
        m.ssm_d_state = 16, m.ssm_dt_rank = 256;
        m.n_expert = 16, m.n_expert_used = 2, m.moe_layer_step = 2;
        return m;
      }(),
      [] {
        ModelShape m{"tiny-jamba", "jamba", 512, 64, 4, 4, 2, 16, 160, 256, 10000.0f, 1e-6f, false};
        m.attn_layers = {2};
        m.ssm_d_state = 16;
        m.n_expert = 4, m.n_expert_used = 2, m.moe_layer_step = 2;
        return m;
      }(),
      // Orion-14B (orion: LayerNorms with biases, NeoX RoPE) and XVERSE-13B (xverse: the llama block), both
      // with untied outputs, and their tiny forms
      {"orion-14b", "orion", 84608, 5120, 40, 40, 40, 128, 15360, 4096, 10000.0f, 1e-5f, false},
      {"tiny-orion", "orion", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false},
      {"xverse-13b", "xverse", 100534, 5120, 40, 40, 40, 128, 13824, 8192, 10000.0f, 1e-6f, false},
      {"tiny-xverse", "xverse", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-6f, false},
      // Seed-OSS-36B: the llama block with NeoX RoPE and q/k/v biases
      {"seed-oss-36b", "seed_oss", 155136, 5120, 64, 80, 8, 128, 27648, 524288, 10000000.0f, 1e-6f, false},
      {"tiny-seed-oss", "seed_oss", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-6f, false},
      g49,
      tg4,
      tm3,
  };
}

// Qwen2/2.5.
std::vector<ModelShape> qwen2_shapes() {
  return {
      {"qwen2.5-0.5b", "qwen2", 151936, 896, 24, 14, 2, 64, 4864, 32768, 1000000.0f, 1e-6f, true},
      {"qwen2.5-1.5b", "qwen2", 151936, 1536, 28, 12, 2, 128, 8960, 32768, 1000000.0f, 1e-6f, true},
      {"qwen2.5-3b", "qwen2", 151936, 2048, 36, 16, 2, 128, 11008, 32768, 1000000.0f, 1e-6f, true},
      {"qwen2.5-7b", "qwen2", 152064, 3584, 28, 28, 4, 128, 18944, 32768, 1000000.0f, 1e-6f, false},
      {"tiny-qwen2", "qwen2", 512, 64, 2, 4, 2, 16, 160, 256, 1000000.0f, 1e-6f, true},
  };
}

// Qwen3 (dense), Qwen3-Embedding (last-token pooling) and Qwen3-Reranker (yes/no head, pooling rank).
std::vector<ModelShape> qwen3_shapes() {
  ModelShape emb{"qwen3-embedding-0.6b", "qwen3", 151669, 1024, 28, 16, 8, 128, 3072, 32768, 1000000.0f, 1e-6f, true};
  emb.pooling = "last";
  ModelShape rr{"qwen3-reranker-0.6b", "qwen3", 151669, 1024, 28, 16, 8, 128, 3072, 40960, 1000000.0f, 1e-6f, true};
  rr.pooling = "rank";
  // tiny reranker: 1024 positions, since the Qwen3-Reranker prompt alone is ~300 tokens of a byte vocabulary
  ModelShape tiny_rr{"tiny-qwen3-reranker", "qwen3", 512, 64, 2, 4, 2, 32, 160, 1024, 1000000.0f, 1e-6f, true};
  tiny_rr.pooling = "rank";
  return {
      {"qwen3-0.6b", "qwen3", 151936, 1024, 28, 16, 8, 128, 3072, 40960, 1000000.0f, 1e-6f, true},
      {"qwen3-8b", "qwen3", 151936, 4096, 36, 32, 8, 128, 12288, 40960, 1000000.0f, 1e-6f, false},
      emb,
      rr,
      {"tiny-qwen3", "qwen3", 512, 64, 2, 4, 2, 32, 160, 256, 1000000.0f, 1e-6f, true},
      tiny_rr,
      // encoders (convert/dummy_encoder.cpp): WordPiece vocabulary, layer-norm eps 1e-12
      {"tiny-bert", "bert", 512, 64, 2, 4, 4, 16, 128, 128, 10000.0f, 1e-12f, false},
      {"tiny-nomic-bert", "nomic-bert", 512, 64, 2, 4, 4, 16, 128, 128, 1000.0f, 1e-12f, false},
      {"tiny-jina-bert-v2", "jina-bert-v2", 512, 64, 2, 4, 4, 16, 128, 128, 10000.0f, 1e-12f, false},
      {"bge-small", "bert", 30522, 384, 12, 12, 12, 32, 1536, 512, 10000.0f, 1e-12f, false},
      {"nomic-embed-text-v1.5", "nomic-bert", 30522, 768, 12, 12, 12, 64, 3072, 2048, 1000.0f, 1e-12f, false},
  };
}

// Phi-3 / 3.5 / 4-mini ("phi3"): fused attn_qkv and gate/up; the 128k models carry LongRoPE factors
// (rope_orig_ctx = original_max_position_embeddings).
std::vector<ModelShape> phi3_shapes() {
  ModelShape p35{"phi-3.5-mini", "phi3", 32064, 3072, 32, 32, 32, 96, 8192, 131072, 10000.0f, 1e-5f, false};
  p35.rope_orig_ctx = 4096;
  ModelShape p4{"phi-4-mini", "phi3", 200064, 3072, 32, 24, 8, 128, 8192, 131072, 10000.0f, 1e-5f, true};
  p4.rope_orig_ctx = 4096;
  p4.n_rot = 96;  // partial_rotary_factor 0.75
  // tiny: LongRoPE past 32 positions, partial RoPE (12 of 16 dimensions)
  ModelShape tiny{"tiny-phi3", "phi3", 512, 64, 2, 4, 2, 16, 160, 1024, 10000.0f, 1e-5f, false};
  tiny.rope_orig_ctx = 32;
  tiny.n_rot = 12;
  return {
      p35,
      {"phi-3-mini-4k", "phi3", 32064, 3072, 32, 32, 32, 96, 8192, 4096, 10000.0f, 1e-5f, false},
      p4,
      tiny,
  };
}

// Mixtures of experts: OLMoE-1B-7B (olmoe), Qwen3-30B-A3B (qwen3moe), Qwen1.5-MoE-A2.7B (qwen2moe),
// Mixtral 8x7B (llama with experts), Granite 3.1 3B-A800M (granitemoe, with granite's scalars), and
// tiny ones of each (8 experts, 2 per token, 256-wide rows).
std::vector<ModelShape> moe_shapes() {
  // GLM-4.5-Air and GLM-4.5 (glm4moe, config.json; their NextN block left out): RoPE over half of
  // each head, one shared expert, the first 1 / 3 layers dense, sigmoid routing, the chosen weights times 1 / 2.5,
  // q/k norms in GLM-4.5 only. tiny-glm4moe: the first of 3 layers dense, scale 2.5, q/k norms.
  auto glm = [](ModelShape s, int64_t dense_lead, float scale, bool qk_norm) {
    s.n_rot = s.head_dim / 2;
    s.n_expert_shared = 1;
    s.n_dense_lead = dense_lead;
    s.expert_weights_scale = scale;
    s.qk_norm = qk_norm;
    return s;
  };
  // DeepSeek-V2-Lite (deepseek2, config.json): MLA with a 512-wide latent, one attn_q (no q rank), heads
  // of 128 + 64 RoPE dimensions and 128-wide values, YaRN x40 over 4096 positions (mscale_all_dim
  // 0.707: log multiplier 0.0707 as the converter writes it), 2 shared experts, layer 0 dense,
  // softmax routing. tiny-deepseek2: its tiny form; tiny-deepseek3: V3's form -- a low-rank q,
  // sigmoid routing with a selection bias in 4 groups of 2 experts (the best 2 groups' experts
  // eligible), renormalized and scaled by 2.5, YaRN x4 over 64 positions. DeepSeek-V3 (and R1): 256
  // experts in 8 groups (4 eligible), 3 dense layers; Kimi K2: 384 experts, no groups.
  auto ds = [](ModelShape s, int64_t kv_rank, int64_t q_rank, int64_t nope, int64_t rope, int64_t v, int64_t shared,
               int64_t dense_lead, bool sigmoid, float scale) {
    s.mla_kv_rank = kv_rank, s.mla_q_rank = q_rank, s.mla_nope = nope, s.mla_v = v;
    s.n_rot = rope;
    s.head_dim = kv_rank + rope;
    s.n_head_kv = 1;
    s.n_expert_shared = shared;
    s.n_dense_lead = dense_lead;
    s.sigmoid_gating = sigmoid;
    s.expert_weights_scale = scale;
    return s;
  };
  auto l4 = [](ModelShape s, int64_t step) {
    s.moe_layer_step = step;
    return s;
  };
  auto rot = [](ModelShape s, int64_t n_rot) {
    s.n_rot = n_rot;
    return s;
  };
  // Ling-mini-2.0 (bailingmoe2): RoPE over half of each head, one shared expert, layer 0 dense, 256
  // experts of 512 rows (8 per token) in 8 groups (the best 4 eligible), sigmoid routing scaled by 2.5;
  // tiny-bailingmoe2: 8 experts in 4 groups (2 eligible)
  auto ling = [](ModelShape s, int64_t groups, int64_t groups_used) {
    s.n_rot = s.head_dim / 2;
    s.n_expert_shared = 1;
    s.n_dense_lead = 1;
    s.expert_weights_scale = 2.5f;
    s.n_expert_groups = groups, s.n_groups_used = groups_used;
    return s;
  };
  auto xmoe = [](ModelShape s, int64_t window) {
    s.n_swa = window;
    s.n_dense_lead = 1;
    s.expert_weights_scale = 2.5f;
    return s;
  };
  auto dots = [](ModelShape s) {
    s.n_expert_shared = 2, s.n_dense_lead = 1, s.expert_weights_scale = 2.5f;
    return s;
  };
  auto ernie = [](ModelShape s) {
    s.n_dense_lead = 1;
    return s;
  };
  auto grouped = [](ModelShape s, int64_t groups, int64_t used) {
    s.n_expert_groups = groups, s.n_groups_used = used;
    return s;
  };
  auto yarn = [](ModelShape s, float factor, int64_t orig, float log_mul) {
    s.rope_scaling = "yarn", s.rope_factor = factor, s.rope_orig_ctx = orig, s.yarn_log_mul = log_mul;
    return s;
  };
  auto moe = [](ModelShape s, int64_t n_expert, int64_t used, int64_t ff_exp, int64_t ff_shexp) {
    s.n_expert = n_expert;
    s.n_expert_used = used;
    s.n_ff_exp = ff_exp;
    s.n_ff_shexp = ff_shexp;
    return s;
  };
  return {
      moe({"olmoe-1b-7b", "olmoe", 50304, 2048, 16, 16, 16, 128, 1024, 4096, 10000.0f, 1e-5f, false}, 64, 8, 0, 0),
      moe({"qwen3-30b-a3b", "qwen3moe", 151936, 2048, 48, 32, 4, 128, 6144, 40960, 1000000.0f, 1e-6f, false}, 128, 8,
          768, 0),
      moe({"qwen1.5-moe-a2.7b", "qwen2moe", 151936, 2048, 24, 16, 16, 128, 5632, 8192, 1000000.0f, 1e-6f, false}, 60,
          4, 1408, 5632),
      moe({"mixtral-8x7b", "llama", 32000, 4096, 32, 32, 8, 128, 14336, 32768, 1000000.0f, 1e-5f, false}, 8, 2, 0, 0),
      moe({"tiny-olmoe", "olmoe", 512, 64, 2, 4, 4, 16, 64, 256, 10000.0f, 1e-5f, false}, 8, 2, 0, 0),
      moe({"tiny-qwen3moe", "qwen3moe", 512, 64, 2, 4, 2, 32, 160, 256, 1000000.0f, 1e-6f, true}, 8, 2, 32, 0),
      moe({"tiny-qwen2moe", "qwen2moe", 512, 64, 2, 4, 2, 16, 160, 256, 1000000.0f, 1e-6f, false}, 8, 2, 32, 96),
      moe({"tiny-mixtral", "llama", 512, 64, 2, 4, 2, 16, 64, 256, 10000.0f, 1e-5f, false}, 8, 2, 0, 0),
      granite(moe({"granite-3.1-3b-a800m", "granitemoe", 49155, 1536, 32, 24, 8, 64, 512, 131072, 10000000.0f, 1e-6f,
                       true}, 40, 8, 0, 0), 12.0f, 0.22f, 0.015625f, 6.0f),
      granite(moe({"tiny-granitemoe", "granitemoe", 512, 64, 2, 4, 2, 16, 64, 256, 10000.0f, 1e-6f, true}, 8, 2, 0, 0),
                  6.0f, 0.5f, 0.1f, 4.0f),
      glm(moe({"glm-4.5-air", "glm4moe", 151552, 4096, 46, 96, 8, 128, 10944, 131072, 1000000.0f, 1e-5f, false}, 128, 8,
              1408, 0), 1, 1.0f, false),
      glm(moe({"glm-4.5", "glm4moe", 151552, 5120, 92, 96, 8, 128, 12288, 131072, 1000000.0f, 1e-5f, false}, 160, 8,
              1536, 0), 3, 2.5f, true),
      glm(moe({"tiny-glm4moe", "glm4moe", 512, 64, 3, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false}, 8, 2, 32, 0), 1,
          2.5f, true),
      // MiniMax-M2: 256 experts of 1536 rows, 8 per token, RoPE over 64 of 128 dimensions
      rot(moe({"minimax-m2", "minimax-m2", 200064, 3072, 62, 48, 8, 128, 1536, 196608, 5000000.0f, 1e-6f, false}, 256,
              8, 0, 0), 64),
      rot(moe({"tiny-minimax-m2", "minimax-m2", 512, 64, 2, 4, 2, 16, 32, 256, 10000.0f, 1e-6f, false}, 8, 2, 0, 0), 8),
      // dots.llm1: layer 0 dense, 128 experts of 1408 rows (6 per token), 2 shared, scale 2.5
      dots(moe({"dots.llm1", "dots1", 152064, 4096, 62, 32, 32, 128, 10944, 32768, 10000000.0f, 1e-5f, false}, 128, 6,
               1408, 0)),
      dots(moe({"tiny-dots1", "dots1", 512, 64, 3, 4, 4, 16, 160, 256, 1000000.0f, 1e-6f, false}, 8, 2, 32, 0)),
      // DeepSeek-MoE-16B (deepseek: the llama block, layer 0 dense, 64 softmax experts of 1408 rows, 6 per token,
      // not renormalized, 2 shared) and a tiny form (dots1's counts: 2 shared, layer 0 dense, x2.5)
      [&] {
        ModelShape m = moe({"deepseek-moe-16b", "deepseek", 102400, 2048, 28, 16, 16, 128, 10944, 4096, 10000.0f, 1e-6f,
                            false}, 64, 6, 1408, 0);
        m.n_expert_shared = 2, m.n_dense_lead = 1;
        return m;
      }(),
      dots(moe({"tiny-deepseek-moe", "deepseek", 512, 64, 3, 4, 2, 16, 160, 256, 10000.0f, 1e-6f, false}, 8, 2, 32, 0)),
      // Hunyuan-A13B (hunyuan-moe: 64 experts of 3072 rows, 8 per token, a shared expert, q/k norms after
      // RoPE with the NTK-scaled base) and a tiny form
      moe({"hunyuan-a13b", "hunyuan-moe", 128167, 4096, 32, 32, 8, 128, 3072, 262144, 11158840.0f, 1e-5f, true}, 64, 8,
          0, 0),
      moe({"tiny-hunyuan-moe", "hunyuan-moe", 512, 64, 2, 4, 2, 16, 32, 256, 10000.0f, 1e-5f, true}, 8, 2, 0, 48),
      // K-EXAONE-like EXAONE MoE (exaone-moe: windows of 128 on three layers of four with NoPE global
      // layers, a dense first layer, sigmoid experts beside a shared one); tiny: 16-position windows
      xmoe(moe({"tiny-exaone-moe", "exaone-moe", 512, 64, 4, 4, 2, 16, 160, 256, 1000000.0f, 1e-5f, false}, 8, 2, 32, 48),
           16),
      ling(moe({"ling-mini-2.0", "bailingmoe2", 157184, 2048, 20, 16, 4, 128, 5120, 32768, 600000.0f, 1e-6f, false}, 256,
               8, 512, 0), 8, 4),
      ling(moe({"tiny-bailingmoe2", "bailingmoe2", 512, 64, 3, 4, 2, 16, 160, 256, 600000.0f, 1e-6f, false}, 8, 2, 32, 0),
           4, 2),
      // Llama 4 Scout (17B-16E: experts in every layer, 1 per token, a shared expert, llama3 RoPE
      // factors x16 over 8192); tiny-llama4: 8 experts on every second layer, 4 layers (layer 3 NoPE)
      l4(moe({"llama-4-scout", "llama4", 202048, 5120, 48, 40, 8, 128, 16384, 10485760, 500000.0f, 1e-5f, false}, 16, 1,
             8192, 0), 1),
      l4(moe({"tiny-llama4", "llama4", 512, 64, 4, 4, 2, 16, 160, 256, 500000.0f, 1e-5f, false}, 8, 1, 32, 0), 2),
      // ERNIE-4.5-21B-A3B: layer 0 dense, 64 experts of 1536 rows (6 per token), two shared experts' rows
      ernie(moe({"ernie-4.5-21b-a3b", "ernie4_5-moe", 103424, 2560, 28, 20, 4, 128, 12288, 131072, 500000.0f, 1e-5f,
                 true}, 64, 6, 1536, 3072)),
      ernie(moe({"tiny-ernie4_5-moe", "ernie4_5-moe", 512, 64, 3, 4, 2, 16, 160, 256, 500000.0f, 1e-5f, true}, 8, 2,
                 32, 64)),
      yarn(ds(moe({"deepseek-v2-lite", "deepseek2", 102400, 2048, 27, 16, 1, 576, 10944, 163840, 10000.0f, 1e-6f, false},
                  64, 6, 1408, 0), 512, 0, 128, 64, 128, 2, 1, false, 1.0f), 40.0f, 4096, 0.0707f),
      ds(moe({"tiny-deepseek2", "deepseek2", 512, 64, 3, 4, 1, 48, 160, 256, 10000.0f, 1e-6f, false}, 8, 2, 32, 0), 32,
         0, 16, 16, 16, 2, 1, false, 1.0f),
      grouped(yarn(ds(moe({"tiny-deepseek3", "deepseek2", 512, 64, 3, 4, 1, 48, 160, 256, 10000.0f, 1e-6f, false}, 8,
                          2, 32, 0), 32, 32, 16, 16, 24, 1, 1, true, 2.5f), 4.0f, 64, 0.1f), 4, 2),
      // Mistral 4 (GGUF mistral4: deepseek2's model under another name), in tiny-deepseek3's form
      grouped(yarn(ds(moe({"tiny-mistral4", "mistral4", 512, 64, 3, 4, 1, 48, 160, 256, 10000.0f, 1e-6f, false}, 8,
                          2, 32, 0), 32, 32, 16, 16, 24, 1, 1, true, 2.5f), 4.0f, 64, 0.1f), 4, 2),
      grouped(yarn(ds(moe({"deepseek-v3", "deepseek2", 129280, 7168, 61, 128, 1, 576, 18432, 163840, 10000.0f, 1e-6f,
                           false}, 256, 8, 2048, 0), 512, 1536, 128, 64, 128, 1, 3, true, 2.5f), 40.0f, 4096, 0.1f),
              8, 4),
      yarn(ds(moe({"kimi-k2", "deepseek2", 163840, 7168, 61, 64, 1, 576, 18432, 131072, 50000.0f, 1e-6f, false}, 384, 8,
                  2048, 0), 512, 1536, 128, 64, 128, 1, 1, true, 2.827f), 32.0f, 4096, 0.1f),
  };
}

// gpt-oss-20b / 120b (config.json): 64 query heads of 64 over 2880 wide, 8 KV heads, 32 / 128 experts
// of 2880 rows with 4 per token, sliding window 128 on every other layer, YaRN factor 32 over 4096
// positions. tiny-gpt-oss: 8 experts of 64 rows (4 per token), window 8, YaRN factor 4 over 64 positions.
std::vector<ModelShape> gptoss_shapes() {
  auto oss = [](ModelShape s, int64_t n_expert, int64_t ff_exp, int64_t window, float yarn, int64_t orig) {
    s.n_expert = n_expert;
    s.n_expert_used = 4;
    s.n_ff_exp = ff_exp;
    s.n_swa = window;
    s.rope_scaling = "yarn";
    s.rope_factor = yarn;
    s.rope_orig_ctx = orig;
    return s;
  };
  return {
      oss({"gpt-oss-20b", "gpt-oss", 201088, 2880, 24, 64, 8, 64, 2880, 131072, 150000.0f, 1e-5f, false}, 32, 2880, 128,
          32.0f, 4096),
      oss({"gpt-oss-120b", "gpt-oss", 201088, 2880, 36, 64, 8, 64, 2880, 131072, 150000.0f, 1e-5f, false}, 128, 2880,
          128, 32.0f, 4096),
      oss({"tiny-gpt-oss", "gpt-oss", 512, 64, 2, 4, 2, 16, 64, 1024, 150000.0f, 1e-5f, false}, 8, 64, 8, 4.0f, 64),
  };
}

// The language models of vision-language releases (text in, text out), with their M-RoPE sections:
// Qwen2.5-VL 3B / 7B (qwen2vl, sectioned 16/24/24), Qwen3-VL 4B / 8B / 30B-A3B (qwen3vl, qwen3vlmoe:
// interleaved 24/20/20 -- pairs 61 and 62 of 64 on the fourth section, unrotated for text --, 3
// deepstack layers), GLM-4.1V-9B (glm4 with sections 8/12/12 over its rotated half). Their tiny forms:
// tiny-qwen3vl(moe) rotate with base 100 and sections 7/4/4 over 16 pairs, so pairs 13 and 14 stay
// still as Qwen3-VL's 61 and 62 do, with angles large enough to tell.
std::vector<ModelShape> vl_shapes() {
  auto sec = [](ModelShape s, std::vector<int32_t> sections, int64_t deepstack) {
    s.rope_sections = std::move(sections);
    s.n_deepstack = deepstack;
    return s;
  };
  auto experts = [](ModelShape s, int64_t n, int64_t used, int64_t ff_exp) {
    s.n_expert = n, s.n_expert_used = used, s.n_ff_exp = ff_exp;
    return s;
  };
  ModelShape glm41v =
      sec({"glm-4.1v-9b", "glm4", 151552, 4096, 40, 32, 2, 128, 13696, 65536, 10000.0f, 1e-5f, false}, {8, 12, 12, 0}, 0);
  glm41v.n_rot = 64;
  ModelShape tiny_glm4v = sec({"tiny-glm4v", "glm4", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false}, {1, 2, 1, 0}, 0);
  tiny_glm4v.n_rot = 8;
  // GLM-4.5V's text model: glm4moe's block (tiny-glm4moe's form) with sections
  ModelShape tiny_glm4v_moe = experts(
      sec({"tiny-glm4v-moe", "glm4moe", 512, 64, 3, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false}, {1, 2, 1, 0}, 0), 8, 2, 32);
  tiny_glm4v_moe.n_rot = 8, tiny_glm4v_moe.n_expert_shared = 1, tiny_glm4v_moe.n_dense_lead = 1;
  return {
      sec({"qwen2.5-vl-3b", "qwen2vl", 151936, 2048, 36, 16, 2, 128, 11008, 128000, 1000000.0f, 1e-6f, true},
          {16, 24, 24, 0}, 0),
      sec({"qwen2.5-vl-7b", "qwen2vl", 152064, 3584, 28, 28, 4, 128, 18944, 128000, 1000000.0f, 1e-6f, false},
          {16, 24, 24, 0}, 0),
      sec({"qwen3-vl-4b", "qwen3vl", 151936, 2560, 36, 32, 8, 128, 9728, 262144, 5000000.0f, 1e-6f, true},
          {24, 20, 20, 0}, 3),
      sec({"qwen3-vl-8b", "qwen3vl", 151936, 4096, 36, 32, 8, 128, 12288, 262144, 5000000.0f, 1e-6f, false},
          {24, 20, 20, 0}, 3),
      experts(sec({"qwen3-vl-30b-a3b", "qwen3vlmoe", 151936, 2048, 48, 32, 4, 128, 6144, 262144, 5000000.0f, 1e-6f,
                   false}, {24, 20, 20, 0}, 3), 128, 8, 768),
      glm41v,
      sec({"tiny-qwen2vl", "qwen2vl", 512, 64, 2, 4, 2, 16, 160, 256, 1000000.0f, 1e-6f, true}, {2, 3, 3, 0}, 0),
      sec({"tiny-qwen3vl", "qwen3vl", 512, 64, 2, 4, 2, 32, 160, 256, 100.0f, 1e-6f, true}, {7, 4, 4, 0}, 3),
      experts(sec({"tiny-qwen3vlmoe", "qwen3vlmoe", 512, 64, 2, 4, 2, 32, 160, 256, 100.0f, 1e-6f, true}, {7, 4, 4, 0}, 3),
              8, 2, 32),
      tiny_glm4v,
      tiny_glm4v_moe,
  };
}

// The classic families (convert/dummy_classic.cpp) and their tiny forms: GPT-2 124M / XL, StarCoderBase-1B and
// StarCoder (multi-query), Pythia-1.4B / 6.9B (gptneox: a quarter of each head rotated), Falcon-7B (one K/V head,
// one norm) / 40B (attn_norm_2), BLOOM-560M / 7B1, MPT-7B (ALiBi 8, no biases), OLMo-1B / 7B, Baichuan2-7B
// (RoPE: 32 layers) / 13B (ALiBi: 40 layers -- llama.cpp picks by the layer count), ChatGLM3-6B and GLM-4-9B in
// its first GGUF form (chatglm: half of each head rotated), CodeShell-7B, Refact-1.6B.
std::vector<ModelShape> classic_shapes() {
  auto with = [](ModelShape m, auto&& f) {
    f(m);
    return m;
  };
  return {
      {"gpt2", "gpt2", 50257, 768, 12, 12, 12, 64, 3072, 1024, 10000.0f, 1e-5f, true},
      {"gpt2-xl", "gpt2", 50257, 1600, 48, 25, 25, 64, 6400, 1024, 10000.0f, 1e-5f, true},
      {"tiny-gpt2", "gpt2", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, true},
      {"starcoderbase-1b", "starcoder", 49152, 2048, 24, 16, 1, 128, 8192, 8192, 10000.0f, 1e-5f, false},
      {"starcoder-15b", "starcoder", 49152, 6144, 40, 48, 1, 128, 24576, 8192, 10000.0f, 1e-5f, false},
      {"tiny-starcoder", "starcoder", 512, 64, 2, 4, 1, 16, 160, 256, 10000.0f, 1e-5f, false},
      with(ModelShape{"pythia-1.4b", "gptneox", 50304, 2048, 24, 16, 16, 128, 8192, 2048, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.n_rot = 32; }),
      with(ModelShape{"pythia-6.9b", "gptneox", 50432, 4096, 32, 32, 32, 128, 16384, 2048, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.n_rot = 32; }),
      with(ModelShape{"tiny-gptneox", "gptneox", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.n_rot = 4; }),
      with(ModelShape{"tiny-gptneox-seq", "gptneox", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.n_rot = 4, m.sequential_block = true; }),
      {"falcon-7b", "falcon", 65024, 4544, 32, 71, 1, 64, 18176, 2048, 10000.0f, 1e-5f, false},
      with(ModelShape{"falcon-40b", "falcon", 65024, 8192, 60, 128, 8, 64, 32768, 2048, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.attn_norm_2 = true; }),
      {"tiny-falcon", "falcon", 512, 64, 2, 4, 1, 16, 160, 256, 10000.0f, 1e-5f, false},
      with(ModelShape{"tiny-falcon-40b", "falcon", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.attn_norm_2 = true; }),
      {"bloom-560m", "bloom", 250880, 1024, 24, 16, 16, 64, 4096, 2048, 10000.0f, 1e-5f, true},
      {"bloom-7b1", "bloom", 250880, 4096, 30, 32, 32, 128, 16384, 2048, 10000.0f, 1e-5f, true},
      {"tiny-bloom", "bloom", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, true},
      with(ModelShape{"mpt-7b", "mpt", 50432, 4096, 32, 32, 32, 128, 16384, 2048, 10000.0f, 1e-5f, true},
           [](ModelShape& m) { m.max_alibi_bias = 8; }),
      with(ModelShape{"tiny-mpt", "mpt", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, true},
           [](ModelShape& m) { m.max_alibi_bias = 8; }),
      // (an MPT with every bias, learned positions, no ALiBi, and q/k/v clamped at 0.2)
      with(ModelShape{"tiny-mpt-biased", "mpt", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.mpt_biases = true, m.mpt_pos_embd = true, m.clamp_kqv = 0.2f; }),
      {"olmo-1b", "olmo", 50304, 2048, 16, 16, 16, 128, 8192, 2048, 10000.0f, 1e-5f, true},
      {"olmo-7b", "olmo", 50304, 4096, 32, 32, 32, 128, 11008, 2048, 10000.0f, 1e-5f, false},
      with(ModelShape{"tiny-olmo", "olmo", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, true},
           [](ModelShape& m) { m.clamp_kqv = 0.2f; }),
      {"baichuan2-7b", "baichuan", 125696, 4096, 32, 32, 32, 128, 11008, 4096, 10000.0f, 1e-6f, false},
      {"baichuan2-13b", "baichuan", 125696, 5120, 40, 40, 40, 128, 13696, 4096, 10000.0f, 1e-6f, false},
      {"tiny-baichuan", "baichuan", 512, 64, 32, 2, 2, 32, 128, 256, 10000.0f, 1e-6f, false},
      {"tiny-baichuan-13b", "baichuan", 512, 64, 40, 2, 2, 32, 128, 256, 10000.0f, 1e-6f, false},
      with(ModelShape{"chatglm3-6b", "chatglm", 65024, 4096, 28, 32, 2, 128, 13696, 8192, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.n_rot = 64; }),
      with(ModelShape{"glm-4-9b-chatglm", "chatglm", 151552, 4096, 40, 32, 2, 128, 13696, 131072, 5000000.0f, 1.5625e-7f,
                      false},
           [](ModelShape& m) { m.n_rot = 64; }),
      with(ModelShape{"tiny-chatglm", "chatglm", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.n_rot = 8; }),
      {"codeshell-7b", "codeshell", 70144, 4096, 42, 32, 8, 128, 16384, 8192, 10000.0f, 1e-5f, false},
      {"tiny-codeshell", "codeshell", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false},
      // Jais-13B (jais: gpt2's layer with a gated FFN with biases, ALiBi 8, q.k over head_dim) and a tiny form
      with(ModelShape{"jais-13b", "jais", 84992, 5120, 40, 40, 40, 128, 13653, 2048, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.max_alibi_bias = 8; }),
      with(ModelShape{"tiny-jais", "jais", 512, 64, 2, 4, 4, 16, 160, 256, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.max_alibi_bias = 8; }),
      // plamo (PLaMo-13B's layer: the llama layer in the parallel block, NeoX RoPE), tiny
      {"tiny-plamo", "plamo", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-6f, false},
      {"tiny-jais2", "jais2", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, true},  // (Jais 2's layer, tied)
      // Refact-1.6B (refact: the llama block with ALiBi, one K/V head)
      {"refact-1.6b", "refact", 49216, 2048, 32, 32, 1, 64, 5632, 4096, 10000.0f, 1e-5f, false},
      {"tiny-refact", "refact", 512, 64, 2, 4, 1, 16, 160, 256, 10000.0f, 1e-5f, false},
      // Qwen-7B and Qwen-1.8B (qwen, the first generation: feed_forward_length is twice the FFN's rows) and a tiny form
      {"qwen-7b", "qwen", 151936, 4096, 32, 32, 32, 128, 22016, 8192, 10000.0f, 1e-6f, false},
      {"qwen-1.8b", "qwen", 151936, 2048, 24, 16, 16, 128, 11008, 8192, 10000.0f, 1e-6f, false},
      {"tiny-qwen", "qwen", 512, 64, 2, 4, 4, 16, 320, 256, 10000.0f, 1e-6f, false},
      // Nemotron-Mini-4B (nemotron: LayerNorms with biases, half of each head rotated, the ungated ReLU-squared FFN)
      with(ModelShape{"nemotron-mini-4b", "nemotron", 256000, 3072, 32, 24, 8, 128, 9216, 4096, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.n_rot = 64; }),
      with(ModelShape{"tiny-nemotron", "nemotron", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false},
           [](ModelShape& m) { m.n_rot = 8; }),
  };
}

// Gemma 4 (convert/dummy_gemma4.cpp): E2B / E4B (per-layer embeddings, the last 20 / 18 layers sharing K/V,
// E2B's FFN twice as wide on those), 31B (K = V on the full layers, 16 K/V heads sliding and 4 full), 26B-A4B
// (128 experts, 8 per token, beside each layer's dense FFN), as their published configs read; the tiny forms
// have every piece of the small ones at once (tiny-gemma4), the 31B's (tiny-gemma4-dense) or the 26B's
// (tiny-gemma4-moe); and deci's tiny forms (DeciLM / Nemotron NAS: every kind of layer).
std::vector<ModelShape> gemma4_shapes() {
  auto g4 = [](ModelShape m, int64_t window, int64_t pattern, int64_t hd_full, int64_t kv_full, int64_t pl,
               int64_t shared, bool wide, bool k_eq_v) {
    m.n_swa = window, m.swa_pattern = pattern, m.head_dim_full = hd_full, m.n_head_kv_full = kv_full;
    m.n_embd_per_layer = pl, m.n_kv_shared = shared, m.double_wide_ffn = wide, m.k_eq_v = k_eq_v;
    m.rope_theta_swa = 10000.0f, m.partial_rotary_full = 0.25f, m.final_softcap = 30.0f;
    return m;
  };
  auto deci = [](ModelShape m, std::vector<int32_t> heads, std::vector<int32_t> kv, std::vector<int32_t> ff) {
    m.layer_heads = std::move(heads), m.layer_kv_heads = std::move(kv), m.layer_ff = std::move(ff);
    return m;
  };
  auto moe = [](ModelShape m, int64_t n, int64_t used, int64_t ff) {
    m.n_expert = n, m.n_expert_used = used, m.n_ff_exp = ff;
    return m;
  };
  auto afmoe = [](ModelShape m, int64_t shared, int64_t dense_lead, int64_t swa, float scale) {
    m.n_expert_shared = shared, m.n_dense_lead = dense_lead, m.n_swa = swa, m.expert_weights_scale = scale;
    return m;
  };
  ModelShape tiny = g4({"tiny-gemma4", "gemma4", 512, 64, 8, 4, 2, 32, 96, 256, 1000000.0f, 1e-6f, true}, 8, 4, 64, 1,
                       16, 4, true, true);
  tiny.layer_out_scale = true;
  return {
      g4({"gemma-4-e2b", "gemma4", 262144, 1536, 35, 8, 1, 256, 6144, 131072, 1000000.0f, 1e-6f, true}, 512, 5, 512, 1,
         256, 20, true, false),
      g4({"gemma-4-e4b", "gemma4", 262144, 2560, 42, 8, 2, 256, 10240, 131072, 1000000.0f, 1e-6f, true}, 512, 6, 512, 2,
         256, 18, false, false),
      g4({"gemma-4-31b", "gemma4", 262144, 5376, 60, 32, 16, 256, 21504, 262144, 1000000.0f, 1e-6f, true}, 1024, 6, 512,
         4, 0, 0, false, true),
      tiny,
      g4({"tiny-gemma4-dense", "gemma4", 512, 64, 6, 4, 4, 32, 128, 256, 1000000.0f, 1e-6f, true}, 8, 3, 64, 1, 0, 0,
         false, true),
      moe(g4({"gemma-4-26b-a4b", "gemma4", 262144, 2816, 30, 16, 8, 256, 2112, 262144, 1000000.0f, 1e-6f, true}, 1024,
             6, 512, 2, 0, 0, false, true), 128, 8, 704),
      deci({"tiny-deci", "deci", 512, 64, 8, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false}, {4, 4, 4, 0, 2, 0, 4, 4},
           {2, 1, 0, 0, 2, 0, 4, 2}, {160, 96, 160, 128, 160, 0, 64, 160}),
      // (a layer with attention and no FFN: llama.cpp's graph drops such a layer's attention, tokenmill adds it)
      deci({"tiny-deci-noffn", "deci", 512, 64, 4, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false}, {4, 4, 0, 4},
           {2, 2, 0, 1}, {160, 0, 96, 160}),
      // OpenELM's layers (openelm: heads, K/V heads and FFN widths growing layer by layer, one attn_qkv each), tiny
      deci({"tiny-openelm", "openelm", 512, 64, 4, 6, 1, 16, 96, 256, 10000.0f, 1e-6f, true}, {2, 4, 4, 6}, {1, 2, 1, 3},
           {96, 128, 160, 192}),
      // Phi-3.5-MoE-instruct (phimoe: 16 experts of 6400 rows, 2 per token) and a tiny form
      moe({"phi-3.5-moe", "phimoe", 32064, 4096, 32, 32, 8, 128, 6400, 131072, 10000.0f, 1e-5f, false}, 16, 2, 6400),
      moe({"tiny-phimoe", "phimoe", 512, 64, 2, 4, 2, 16, 96, 256, 10000.0f, 1e-5f, false}, 8, 2, 96),
      moe(g4({"tiny-gemma4-moe", "gemma4", 512, 64, 6, 4, 4, 32, 96, 256, 1000000.0f, 1e-6f, true}, 8, 3, 64, 1, 0, 0,
             false, true), 8, 2, 48),
      // Arcee Trinity Mini (afmoe, as public summaries give its config: 128 experts of 1024 rows, 8 per token,
      // one shared, two dense layers first, windows of 2048 on three layers of four, route scale 2.826) and
      // tiny forms: with windows (layer 3 global, without RoPE) and an untied output; without windows
      // (layer 3 still without RoPE), tied, two shared experts
      afmoe(moe({"trinity-mini", "afmoe", 200192, 2048, 32, 32, 4, 128, 6144, 131072, 10000.0f, 1e-5f, false}, 128, 8,
                1024), 1, 2, 2048, 2.826f),
      afmoe(moe({"tiny-afmoe", "afmoe", 512, 64, 6, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false}, 8, 2, 48), 1, 1, 8,
            2.5f),
      afmoe(moe({"tiny-afmoe-full", "afmoe", 512, 64, 5, 4, 1, 16, 128, 256, 10000.0f, 1e-5f, true}, 6, 3, 32), 2, 2, 0,
            0.0f),
  };
}

}  // namespace

std::vector<ModelShape> known_shapes() {
  std::vector<ModelShape> out;
  for (auto* f : {&llama_shapes, &mistral_shapes, &qwen2_shapes, &qwen3_shapes, &phi3_shapes, &gemma_shapes, &moe_shapes,
                  &gptoss_shapes, &more_shapes, &vl_shapes, &classic_shapes, &gemma4_shapes})
    for (auto& s : (*f)()) out.push_back(s);
  return out;
}

std::optional<ModelShape> find_shape(const std::string& name) {
  for (auto& s : known_shapes())
    if (s.name == name) return s;
  return std::nullopt;
}

}  // namespace tmill
