// Hugging Face model folder (config.json + safetensors) -> GGUF, following llama.cpp's
// convert_hf_to_gguf.py: the same architecture names, metadata keys, tensor names, shapes (ggml
// order: ne[0] = the HF last dimension), 1-D tensors in F32, llama-family q/k row permutation and
// llama3 `rope_freqs.weight`; phi3 keeps attn_qkv / gate-up ffn_up fused and gets LongRoPE's
// rope_factors_long/short.weight and rope.scaling.attn_factor. Mixtures of experts (Qwen2-MoE, Qwen3-MoE,
// OLMoE, Mixtral): each layer's per-expert matrices are stacked into the 3-D ffn_{gate,up,down}_exps
// tensors ([cols, rows, n_expert] in ggml order), the routers (ffn_gate_inp, qwen2moe's
// ffn_gate_inp_shexp) stay F32, and expert_count / expert_used_count / expert_feed_forward_length /
// expert_shared_feed_forward_length are written as the script's MoE classes write them. The same
// families' experts also come fused, as transformers 5 saves them: mlp.experts.gate_up_proj
// [n_expert, 2 * rows, hidden] (gate rows, then up rows) and mlp.experts.down_proj [n_expert, hidden,
// rows], split and written as the same tensors. gpt-oss (GptOssModel): q/k/v/o biases, attn_sinks,
// the router ffn_gate_inp with its bias, post_attention_norm, attention.sliding_window, and experts
// with biases from fused tensors whose gate and up columns interleave: MXFP4 ones (*_blocks / *_scales
// uint8) repacked bit for bit into GGUF MXFP4 whatever the output type (file type MOSTLY_MXFP4_MOE),
// dequantized ones ([n_expert, hidden, 2 * rows] BF16, used as x @ W) written in the output type.
// Tokenizer metadata is added by a caller-supplied hook
// (HfConvertOptions::add_tokenizer), called where llama.cpp writes those keys; without one the file
// holds hyper-parameters and weights only. convert/hf_convert.h installs the HF tokenizer as the hook
// (the complete conversion `tokenmill convert --hf` runs).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "core/result.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"

namespace tmill {

struct HfConvertOptions {
  // Type of the 2-D weights: "f32", "f16", "bf16", or "auto" = the source dtype when all 2-D source
  // weights share one (F32/F16/BF16), else f32 (lossless). 1-D tensors are always F32.
  std::string outtype = "auto";
  std::string name;  // general.name; default: the folder's name
  // Adds the tokenizer.ggml.* metadata; called after the hyper-parameters. Optional.
  std::function<Status(const std::string& hf_dir, GgufWriter& w)> add_tokenizer;
};

struct HfModel {
  std::string dir;
  HfConfig config;
  SafetensorsModel weights;
  static Result<HfModel> open(const std::string& hf_dir);
};

// The format of weights quantized by another tool, told from the tensors: F8_E4M3 / F8_E5M2 dtypes or
// *.weight_scale tensors (FP8), *.absmax / *.quant_state.* / *.SCB (bitsandbytes), *.qweight with
// *.g_idx (GPTQ) or without (AWQ). nullopt for plain weights. HfModel::open refuses such folders
// (config.json's quantization_config is refused by load_hf_config).
// fp8: config.json says FP8 or INT8 (HfConfig::scaled()): such tensors and their scales are expected;
// packed: config.json names a packed integer format (HfConfig::packed): its tensors are expected.
std::optional<std::string> hf_quantized_weights(const SafetensorsModel& w, bool fp8 = false,
                                                HfConfig::Packed packed = HfConfig::Packed::None);

// The name of a tensor of a multimodal checkpoint's language model as a text model's
// ("language_model.model.layers.0..." and transformers 4.52's "model.language_model.layers.0..." ->
// "model.layers.0..."); nullopt for the vision tower and its projector (not converted); any other
// name as it is.
std::optional<std::string> hf_text_tensor_name(const std::string& hf_name);

// HF tensor name -> GGUF name ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight").
// Empty string for tensors llama.cpp drops (rotary_emb.inv_freq); an error for unknown names.
Result<std::string> hf_tensor_to_gguf_name(const std::string& hf_name);

// An expert's matrix -> (the stacked GGUF tensor, the expert's index):
// "model.layers.3.mlp.experts.7.up_proj.weight" -> ("blk.3.ffn_up_exps.weight", 7); Mixtral's
// "block_sparse_moe.experts.E.w1/w3/w2" are gate/up/down. nullopt for any other name.
std::optional<std::pair<std::string, int64_t>> hf_expert_tensor(const std::string& hf_name);
// The layer index of a decoder layer's tensor (model.layers.<L>.…), else none.
std::optional<int64_t> hf_layer_of(const std::string& hf_name);

// A fused expert tensor of a layer: "model.layers.3.mlp.experts.gate_up_proj" -> (3, GateUp).
// transformers 5 (Qwen MoE, OLMoE, Mixtral): gate_up_proj / down_proj (also with ".weight"); gpt-oss
// also gate_up_proj_bias / down_proj_bias and the MXFP4 *_blocks / *_scales. nullopt for other names.
enum class HfFusedExpertPart { GateUp, Down, GateUpBias, DownBias, GateUpBlocks, GateUpScales, DownBlocks, DownScales };
struct HfFusedExpert {
  int64_t layer;
  HfFusedExpertPart part;
  bool operator==(const HfFusedExpert&) const = default;
};
std::optional<HfFusedExpert> hf_fused_expert_tensor(const std::string& hf_name);

// Row permutation llama.cpp applies to llama q/k weights and biases (HF "rotate half" -> GGUF adjacent
// pairs): for rows = n_head * head_dim, output row h*head_dim + 2*j + k comes from input row
// h*head_dim + k*head_dim/2 + j (the reshape(n_head, 2, head_dim/2, ...).swapaxes(1, 2) of the script).
int64_t llama_qk_permuted_source_row(int64_t out_row, int64_t head_dim);

// Adds the metadata and tensors of `m` to `w`. The tensors' producers read from `m`, which must
// outlive w.write(). Fails (before anything is written) on missing/extra/misshapen tensors.
Status add_hf_model_to_gguf(const HfModel& m, const HfConvertOptions& opts, GgufWriter& w);

// Opens hf_dir, converts and writes out_path (atomically: a .tmp file renamed at the end).
Status convert_hf_to_gguf(const std::string& hf_dir, const std::string& out_path, const HfConvertOptions& opts);

}  // namespace tmill
