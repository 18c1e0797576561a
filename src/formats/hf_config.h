// Hyper-parameters from a Hugging Face config.json for the decoder-only families we convert:
// LlamaForCausalLM, MistralForCausalLM and MixtralForCausalLM (GGUF "llama"), Qwen2ForCausalLM ("qwen2"),
// Qwen3ForCausalLM ("qwen3"), Phi3ForCausalLM ("phi3"), Gemma2ForCausalLM ("gemma2"),
// Gemma3ForCausalLM and Gemma3ForConditionalGeneration's text model ("gemma3"), the mixtures of experts
// Qwen2MoeForCausalLM ("qwen2moe"), Qwen3MoeForCausalLM ("qwen3moe"), OlmoeForCausalLM ("olmoe"),
// GptOssForCausalLM ("gpt-oss": its experts may come as MXFP4, quantization_config.quant_method "mxfp4"),
// GemmaForCausalLM ("gemma"), GraniteForCausalLM ("granite"), SmolLM3ForCausalLM ("smollm3"),
// Olmo2ForCausalLM and Olmo3ForCausalLM ("olmo2"), Exaone4ForCausalLM ("exaone4"), Glm4ForCausalLM ("glm4"),
// GraniteMoeForCausalLM ("granitemoe"), Ministral3ForCausalLM ("mistral3"), Glm4MoeForCausalLM ("glm4moe"),
// DeepseekV2ForCausalLM and DeepseekV3ForCausalLM ("deepseek2"), MiniMaxM2ForCausalLM ("minimax-m2"),
// SeedOssForCausalLM ("seed_oss"), Lfm2ForCausalLM ("lfm2").
// Missing optional fields take the transformers defaults; an MoE's expert counts and sizes are required.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace tmill {

enum class HfRopeScalingType { None, Linear, Llama3, Yarn, LongRope };

struct HfRopeScaling {
  HfRopeScalingType type = HfRopeScalingType::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  // llama3: the pre-extension context (default 8192); yarn: written when the config has it (else 0).
  int64_t original_max_position_embeddings = 0;
  // longrope (phi3, also "su"): per-frequency divisors, rotary dims / 2 each
  std::vector<float> short_factor, long_factor;
  // yarn: the optional fields llama.cpp's converter copies into rope.scaling.yarn_* (NaN: absent)
  double beta_fast = std::nan(""), beta_slow = std::nan(""), extrapolation_factor = std::nan(""),
         attention_factor = std::nan("");
};

struct HfConfig {
  std::string hf_arch;    // architectures[0], e.g. "Qwen2ForCausalLM"
  std::string gguf_arch;  // "llama", "qwen2" or "qwen3"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  bool head_dim_in_config = false;  // llama.cpp writes attention.key_length/value_length only then
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  HfRopeScaling rope_scaling;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  int64_t vocab_size = 0;
  std::string torch_dtype;      // "bfloat16", "float16", "float32" or "" when absent
  bool attention_bias = false;  // q/k/v projections have biases (always for qwen2; llama: also o_proj)
  bool mlp_bias = false;        // llama: gate/up/down have biases
  bool qk_norm = false;         // qwen3: RMSNorm on each q/k head
  // llama family: HF stores q/k rows in "rotate half" order; GGUF llama wants adjacent pairs, so the
  // converter permutes them. qwen2/qwen3 keep HF order and run NeoX-style RoPE.
  bool permute_qk = false;
  // phi3: q/k/v come as one qkv_proj and gate/up as one gate_up_proj (kept fused, as llama.cpp does);
  // RoPE rotates rope_dims = partial_rotary_factor * head_dim dimensions; the context before
  // LongRoPE's extension (original_max_position_embeddings) is written for every phi3 model.
  bool fused_qkv_ffn = false;
  bool fused_ffn = false;  // glm4: gate/up fused (gate_up_proj, kept fused), q/k/v apart
  int64_t rope_dims = 0;               // 0 before parsing; then head_dim unless partial
  int64_t original_context = 0;        // phi3
  int64_t sliding_window = 0;          // phi3 (0 when none), gpt-oss (required): written as llama.cpp's converter does
  // Mixture of experts: experts (num_local_experts / num_experts; 0 = a dense model), experts per
  // token (num_experts_per_tok), each expert's FFN rows (qwen2moe/qwen3moe: moe_intermediate_size,
  // written as expert_feed_forward_length; olmoe and Mixtral: intermediate_size), qwen2moe's shared
  // expert rows (shared_expert_intermediate_size). olmoe: q/k RMSNorm over the whole projection.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t moe_intermediate_size = 0;     // 0: the experts have intermediate_size rows
  int64_t shared_expert_intermediate_size = 0;  // > 0: qwen2moe's shared expert
  // glm4moe (GLM-4.5): n_shared_experts ungated shared experts of moe_intermediate_size rows each,
  // the first first_k_dense_replace layers dense (intermediate_size rows), routed_scaling_factor and
  // norm_topk_prob for the sigmoid routing; the num_nextn_predict_layers NextN (MTP) layers after
  // the model's own are left out of the conversion.
  int64_t n_shared_experts = 0, first_dense_layers = 0, nextn_layers = 0;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = false;
  // deepseek2 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM) as well: scoring_func sigmoid (else
  // softmax), topk_method noaux_tc (the selection bias e_score_correction_bias), grouped routing
  // (n_group, topk_group: written as present), and multi-head latent attention -- kv_lora_rank,
  // q_lora_rank (0: one q_proj), qk_nope_head_dim, qk_rope_head_dim (rope_dims), v_head_dim;
  // rope_scaling's mscale_all_dim becomes yarn_log_mul as 0.1 x mscale_all_dim.
  bool sigmoid_scoring = false, selection_bias = false;
  int64_t n_group = 0, topk_group = 0;
  int64_t mla_kv_rank = 0, mla_q_rank = 0, mla_nope = 0, mla_v = 0;
  bool is_mla() const { return mla_kv_rank > 0; }
  bool dense_layer(int64_t layer) const { return n_expert == 0 || layer < first_dense_layers; }
  bool qk_norm_full = false;
  // lfm2 (Lfm2ForCausalLM): per layer 1 for a gated short convolution (layer_types "conv", or a layer
  // not in full_attn_idxs), whose kernel has conv_l taps (conv_L_cache); intermediate_size is then the
  // FFN's adjusted width (block_auto_adjust_ff_dim), as the converter writes it
  std::vector<uint8_t> conv_layers;
  int64_t conv_l = 0;
  bool is_conv(int64_t layer) const { return !conv_layers.empty() && conv_layers[static_cast<size_t>(layer)] != 0; }
  // gpt-oss: config.json's quantization_config says the experts are MXFP4 (quant_method "mxfp4"); the
  // tensors decide what is converted (MXFP4 *_blocks / *_scales, or dequantized gate_up_proj / down_proj).
  bool mxfp4 = false;
  // FP8 checkpoints (quantization_config quant_method "fp8", or "compressed-tensors" with 8-bit float
  // weights): each FP8 matrix comes with its scale (`<name>_scale`: per tensor or per row;
  // `<name>_scale_inv`: per fp8_block[0] x fp8_block[1] block), and is converted dequantized (BF16 by
  // default), as llama.cpp's converter does.
  bool fp8 = false;
  int64_t fp8_block[2] = {128, 128};
  // compressed-tensors "int-quantized" (W8A8 / W8A16 releases): I8 matrices, each with its
  // `<name>_scale` per row or per tensor, symmetric; dequantized like FP8 (activation scales unused).
  bool int8 = false;
  // FP8 or INT8 matrices with scales (the converter's "scaled" matrices).
  bool scaled() const { return fp8 || int8; }
  // Integer weights packed into int32 words with a scale (and zero point) per group of input columns:
  // GPTQ (quant_method "gptq": `.qweight` [in / per-word, out] packed along the input, `.qzeros`,
  // `.scales` [groups, out], `.g_idx` [in]; checkpoint_format "gptq" stores each zero minus one),
  // AWQ (quant_method "awq", version "gemm": `.qweight` [in, out / 8] packed along the output in
  // AutoAWQ's order, `.qzeros`, `.scales`), and compressed-tensors' "pack-quantized" format
  // (`.weight_packed` [out, in / per-word], `.weight_scale` [out, groups], optional
  // `.weight_zero_point` [out / per-word, groups] and `.weight_g_idx`; symmetric without zero points:
  // zero 2^(bits-1)). Converted by convert/hf_packed.h: 4-bit groups of whole 32-column blocks in
  // order become Q4_0 (zero 8) or Q4_1 blocks with the same values; anything else is dequantized.
  enum class Packed { None, Gptq, Awq, CompressedTensors };
  Packed packed = Packed::None;
  int packed_bits = 0;
  int64_t packed_group = 0;        // input columns per group; 0: one group per row (per channel)
  bool gptq_zero_minus_one = true;  // GPTQ checkpoint_format "gptq" (v1); "gptq_v2" stores zeros as they are

  // Gemma 2 / Gemma 3 (Gemma2ForCausalLM, Gemma3ForCausalLM, and the text model of
  // Gemma3ForConditionalGeneration, its "text_config"): RMSNorm weights are stored as w for a
  // (1 + w) scale and written with the 1 added, as llama.cpp's converter does; post-attention and
  // post-FFN norms; soft-capping of attention scores and logits (0: none); sliding_window on the
  // family's layers (gemma2: even layers; gemma3: five of six), or per layer from layer_types /
  // sliding_window_pattern (swa_layers, empty: the family's pattern); gemma3's sliding layers rotate
  // with rope_local_base_freq (rope_theta_swa).
  bool gemma = false;
  double attn_softcap = 0, final_softcap = 0;
  // The sandwich norms: post_attention_layernorm (renamed post_attention_norm) and
  // post_feedforward_layernorm (post_ffw_norm) after each block (gemma2/gemma3, olmo2); olmo2 has no
  // norm before the blocks (input_layernorm, the FFN's pre-norm: pre_norms false).
  bool post_norms = false;
  bool pre_norms = true;
  // post_attention_layernorm is the attention output's norm (gemma2/3, olmo2, exaone4), not the FFN's
  // pre-norm (llama's name; glm4 calls its attention output's norm post_self_attn_layernorm).
  bool post_attention_is_output_norm() const { return post_norms && gguf_arch != "glm4"; }
  // gpt-oss and glm4moe name the FFN's pre-norm post_attention_norm in GGUF (llama.cpp's maps)
  bool ffn_norm_is_post_attention_norm() const {
    return gguf_arch == "gpt-oss" || gguf_arch == "glm4moe" || gguf_arch == "seed_oss";
  }
  // Granite's multipliers (0: not a granite config): granite.embedding_scale, residual_scale,
  // attention.scale, logit_scale.
  double embedding_multiplier = 0, residual_multiplier = 0, attention_multiplier = 0, logits_scaling = 0;
  // Ministral 3 (mistral3): rope_parameters' mscale_all_dim and llama_4_scaling_beta, written as
  // rope.scaling.yarn_log_multiplier and attention.temperature_scale (as Mistral3Model does).
  double yarn_log_mul = 0, attn_temperature_scale = 0;
  double rope_theta_swa = 0;
  std::vector<bool> swa_layers;

  int64_t expert_rows() const { return moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size; }
  bool gptoss() const { return gguf_arch == "gpt-oss"; }

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
};

// `source` names the file in error messages. A config whose quantization_config names a method
// the converter does not read (bitsandbytes, HQQ, 3-bit GPTQ, ...) is refused with a message naming
// the format; FP8, MXFP4 (gpt-oss), GPTQ, AWQ and compressed-tensors (float8 or pack-quantized) are read.
Result<HfConfig> parse_hf_config(std::string_view json_text, const std::string& source = "config.json");
Result<HfConfig> load_hf_config(const std::string& hf_dir);  // reads HF_DIR/config.json

// The format a quantization method of transformers / vLLM ("awq", "gptq", "bitsandbytes", "fp8",
// "compressed_tensors", ...; lower case, '-' as '_') is known as in messages: "AWQ", "GPTQ", "FP8", ...
std::string hf_quant_format_name(const std::string& method);

// llama3 RoPE scaling as llama.cpp's converter stores it: the `rope_freqs.weight` F32 tensor of
// head_dim/2 factors by which each rotary frequency is divided (1 for high frequencies, `factor` for
// low ones, smoothly interpolated in between), computed in float32 like the converter's torch code.
std::vector<float> llama3_rope_factors(const HfConfig& c);

}  // namespace tmill
