// Random-weight models of real shapes (vLLM's `--load-format dummy`): what users size hardware with
// before downloading weights, and what our speed benchmarks run on (speed does not depend on values).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "formats/gguf.h"

namespace tmill {

class ThreadPool;

struct ModelShape {
  std::string name;  // "qwen2.5-0.5b"
  std::string arch;  // "qwen2"
  int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
  float rope_theta, rms_eps;
  bool tied;
  // llama3-style rope scaling (factor, low_freq_factor, high_freq_factor, original context), 0 = none
  float rope_llama3_factor = 0, rope_low = 1, rope_high = 4;
  int64_t rope_orig_ctx = 0;  // llama3 above, or phi3 LongRoPE's original context (factors when < n_ctx)
  int64_t n_rot = 0;          // dimensions RoPE rotates per head; 0 = head_dim (Phi-4-mini rotates 3/4)
  // Mixture of experts (qwen3moe, qwen2moe, olmoe; llama with n_expert > 0 is Mixtral-style): experts,
  // experts per token, each expert's FFN rows (0 = n_ff; olmoe and llama need n_ff), the shared
  // expert's rows (qwen2moe; 0 = n_ff).
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
  // glm4moe: shared experts (expert_shared_count; one SwiGLU of count x n_ff_exp rows; 0: the family's
  // default, 1), dense layers before the expert layers (leading_dense_block_count), the chosen experts'
  // weight scale (expert_weights_scale; 0: not written), per-head q/k norms (GLM-4.5; Air has none).
  int64_t n_expert_shared = 0, n_dense_lead = 0;
  float expert_weights_scale = 0;
  bool qk_norm = false;
  // deepseek2 (MLA): the latent's width (kv_lora_rank), the q projection's low rank (q_lora_rank; 0:
  // one attn_q, as V2-Lite), each head's dimensions without RoPE (qk_nope_head_dim; n_rot is
  // qk_rope_head_dim) and its value width (v_head_dim); head_dim must be mla_kv_rank + n_rot, n_head_kv
  // 1. sigmoid_gating: DeepSeek-V3's sigmoid routing with exp_probs_b and renormalized weights (else
  // V2's softmax). The sharing, dense-layer and scale fields above apply as for glm4moe.
  int64_t mla_kv_rank = 0, mla_q_rank = 0, mla_nope = 0, mla_v = 0;
  bool sigmoid_gating = false;
  // grouped routing (expert_group_count / expert_group_used_count: DeepSeek-V3's 8 / 4); 0: none
  int64_t n_expert_groups = 0, n_groups_used = 0;
  // llama4: experts every moe_layer_step-th layer (interleave_moe_layer_step; 0: every layer)
  int64_t moe_layer_step = 0;
  // Sliding-window attention: the window (attention.sliding_window; gemma2/gemma3, gpt-oss (its even
  // layers), and llama as Mistral 7B v0.1 writes it), every swa_pattern-th layer global (0: the family's default, gemma2 2,
  // gemma3 6; llama: all layers slide), the sliding layers' RoPE base (rope.freq_base_swa; 0: none).
  int64_t n_swa = 0, swa_pattern = 0;
  float rope_theta_swa = 0;
  // rope.scaling.type "linear" or "yarn" with rope.scaling.factor (YaRN: rope_orig_ctx is its
  // original_context_length); "" = none.
  std::string rope_scaling = {};
  float rope_factor = 0;
  // gemma: attention / final logit soft-capping (0: not written; gemma2's reader then uses 50 / 30)
  float attn_softcap = 0, final_softcap = 0;
  // granite's four scalars (granite.embedding_scale, residual_scale, attention.scale, logit_scale;
  // 0: not written; granite requires logit_scale)
  float embd_scale = 0, residual_scale = 0, attn_scale = 0, logit_scale = 0;
  // mistral3: YaRN's betas and log multiplier (rope.scaling.yarn_*), the attention temperature scale
  // (attention.temperature_scale); 0: not written.
  float yarn_beta_fast = 0, yarn_beta_slow = 0, yarn_log_mul = 0, attn_temp_scale = 0;
  // lfm2: the layers with attention (the others are short convolutions of conv_l taps; 0: 3)
  std::vector<int64_t> attn_layers = {};
  int64_t conv_l = 0;
  // granitehybrid: the Mamba-2 mixers' state size, heads, groups and convolution length (0: 128, 48,
  // 1, 4; the inner width is 2 n_embd, as llama.cpp requires); attn_layers names the attention layers.
  // qwen35: the gated delta nets' head size, value heads and key heads (every fourth layer attention)
  int64_t ssm_d_state = 0, ssm_n_head = 0, ssm_n_group = 0, ssm_d_conv = 0;
  bool ssm_rope = false;
  // falcon-h1: the mixers' inner width (0: 2 n_embd) and no grouped norm (ssm_norm; Falcon-H1's
  // mamba_rms_norm false)
  int64_t ssm_d_inner = 0;
  bool ssm_no_norm = false;
  // mamba, jamba (Mamba-1): dt's rank (0: ceil(n_embd / 16), as the checkpoints) and falcon-mamba's weightless RMS
  // norms on dt, B and C
  int64_t ssm_dt_rank = 0;
  bool ssm_dt_b_c_rms = false;  // granitehybrid: RoPE on the attention layers (Bamba; Granite 4.0-H has none)
  // nemotron_h: each layer's block, as its hybrid_override_pattern -- M a Mamba-2 mixer, * attention, - an MLP
  // (nemotron_h_moe: E an experts layer)
  std::string layer_pattern = {};
  // M-RoPE (rope.dimension_sections; Qwen's vision-language models qwen2vl / qwen3vl / qwen3vlmoe need
  // them, glm4 / glm4moe with them are GLM-4.1V / GLM-4.5V); empty: none. qwen3vl*: the deepstack layers.
  std::vector<int32_t> rope_sections = {};
  int64_t n_deepstack = 0;
  // qwen3next: q, k, v and z in one ssm_in (files converted before llama.cpp split it into attn_qkv and
  // attn_gate)
  bool gdn_legacy_in = false;
  // The classic families (convert/dummy_classic.cpp): gptneox's sequential block (use_parallel_residual
  // false), falcon's second norm (attn_norm_2: Falcon-40B), mpt's / jais's maximum ALiBi bias (0: none
  // written), mpt's biases (MPT's no_bias false) and learned positions, mpt's / olmo's q/k/v clamp (0:
  // none written).
  bool sequential_block = false, attn_norm_2 = false;
  float max_alibi_bias = 0;
  bool mpt_biases = false, mpt_pos_embd = false;
  float clamp_kqv = 0;
  // gemma4 (convert/dummy_gemma4.cpp; head_dim, n_head_kv, n_swa and swa_pattern are the sliding layers',
  // every swa_pattern-th layer full): the full layers' head size and K/V heads (0: the sliding ones'),
  // their share of rotated dimensions (rope_freqs.weight's factors; 0: 1), K = V on them (no attn_v), the
  // per-layer embeddings' width (0: none), the last layers sharing K/V, the FFN twice as wide on those
  // (use_double_wide_mlp), layer_output_scale tensors.
  int64_t head_dim_full = 0, n_head_kv_full = 0;
  float partial_rotary_full = 0;
  bool k_eq_v = false;
  int64_t n_embd_per_layer = 0, n_kv_shared = 0;
  bool double_wide_ffn = false, layer_out_scale = false;
  // deci (convert/dummy_deci.cpp): each layer's query heads (0: no attention), K/V heads (0 with heads:
  // "linear attention") and FFN width (0: none); n_head / n_head_kv / n_ff serve where these are empty
  std::vector<int32_t> layer_heads = {}, layer_kv_heads = {}, layer_ff = {};
  // Embedding models' default --pooling ("last": Qwen3-Embedding; "rank": Qwen3-Reranker); "" = none.
  std::string pooling = {};
  // gemma-embedding: sentence-transformers' dense projections after pooling, dense_2 to this width and
  // dense_3 back to n_embd (EmbeddingGemma: 3072); 0: none written
  int64_t n_embd_dense = 0;
};

// Known shapes (convert/dummy_shapes.cpp), plus tiny ones for tests ("tiny-llama", "tiny-qwen2", "tiny-qwen3",
// "tiny-phi3", "tiny-qwen3moe", "tiny-qwen2moe", "tiny-olmoe", "tiny-mixtral", "tiny-gemma2", "tiny-gemma3",
// "tiny-mistral", "tiny-llama-yarn", "tiny-gpt-oss", "tiny-qwen3-reranker", "tiny-gemma", "tiny-granite",
// "tiny-smollm3", "tiny-olmo2", "tiny-olmo3", "tiny-exaone", "tiny-exaone4", "tiny-exaone4-swa", "tiny-ernie4_5",
// "tiny-glm4", "tiny-granitemoe", "tiny-mistral3", "tiny-glm4moe", "tiny-deepseek2",
// "tiny-deepseek3", "tiny-ernie4_5-moe", "tiny-minimax-m2", "tiny-dots1", "tiny-seed-oss",
// "tiny-command-r", "tiny-cohere2", "tiny-llama4",
// "tiny-starcoder2", "tiny-phi2", "tiny-stablelm", "tiny-lfm2", "tiny-lfm2moe", "tiny-bailingmoe2",
// "tiny-hunyuan-dense", "tiny-hunyuan-moe", "tiny-mistral4",
// "tiny-arcee", "tiny-apertus", "tiny-exaone-moe", "tiny-granitehybrid", "tiny-granitehybrid-moe", "tiny-bamba",
// "tiny-qwen35", "tiny-qwen35moe", "tiny-nemotron-h", "tiny-nemotron-h-moe", "tiny-qwen2vl", "tiny-qwen3vl",
// "tiny-qwen3vlmoe", "tiny-glm4v", "tiny-glm4v-moe", "tiny-qwen3next", "tiny-qwen3next-legacy",
// "tiny-falcon-h1", "tiny-falcon-h1-nonorm", "tiny-minicpm", "tiny-minicpm-moe", "tiny-internlm2",
// "tiny-mamba", "tiny-falcon-mamba", "tiny-mamba2", "tiny-jamba", "tiny-orion", "tiny-xverse", "tiny-gpt2",
// "tiny-starcoder", "tiny-gptneox", "tiny-gptneox-seq", "tiny-falcon", "tiny-falcon-40b", "tiny-bloom", "tiny-mpt",
// "tiny-mpt-biased", "tiny-olmo", "tiny-baichuan", "tiny-baichuan-13b", "tiny-chatglm", "tiny-codeshell",
// "tiny-deepseek-moe", "tiny-refact", "tiny-jais2", "tiny-jais", "tiny-plamo", "tiny-gemma4", "tiny-gemma4-dense",
// "tiny-gemma4-moe", "tiny-nemotron", "tiny-deci", "tiny-deci-noffn", "tiny-phimoe", "tiny-gemma-embedding",
// "tiny-gemma-embedding-nodense", "tiny-afmoe", "tiny-afmoe-full", "tiny-qwen", "tiny-openelm").
std::vector<ModelShape> known_shapes();
std::optional<ModelShape> find_shape(const std::string& name);

struct DummyOptions {
  ModelShape shape;
  DType dtype = DType::F16;   // F32, F16, BF16, Q8_0, Q4_0, IQ4_NL, IQ4_XS, MXFP4, Q2_K, Q3_K (2-D weights; norms F32)
  bool pure = false;          // 4-bit types: also the output/tied embedding in that type (else Q8_0/Q6_K like llama.cpp)
  // Standard deviation of the 2-D weights (uniform in +-std*sqrt(3)); 0: the defaults (embedding and
  // output +-0.05, other matrices +-0.035). Larger values give tiny models sharper, less flat logits.
  float std = 0;
  uint64_t seed = 42;
  std::string vocab_path;     // GGUF whose tokenizer.* keys are copied (its token count sets n_vocab)
  int threads = 0;            // 0 = all cores
  // Embedding models: `<arch>.pooling_type` ("none", "mean", "cls", "last", "rank"). Decoders: empty
  // is the shape's (ModelShape::pooling; none: no key, a generation model); rank (qwen3 only) writes a
  // Qwen3-Reranker as convert_hf_to_gguf.py does: cls.output.weight = the output matrix's rows of the
  // tokens "yes" and "no" (added to a synthetic vocabulary with <|im_start|> and <|im_end|>),
  // qwen3.classifier.output_labels ["yes", "no"] and tokenizer.chat_template.rerank. Encoders (bert,
  // nomic-bert, jina-bert-v2; convert/dummy_encoder.cpp): empty is cls (bert) or mean; rank adds bert's
  // classification head (a reranker).
  std::string pooling;
  // A coder model's fill-in-the-middle tokens in the synthetic vocabulary (Qwen2.5-Coder's names:
  // <|fim_prefix|> <|fim_suffix|> <|fim_middle|> <|fim_pad|> <|repo_name|> <|file_sep|>, control
  // tokens before the end, with their tokenizer.ggml.fim_*_token_id keys as convert_hf_to_gguf.py
  // writes them): what /infill needs.
  bool fim = false;
};

// Fills one row with uniform values in [center - spread, center + spread], reproducibly from (seed,
// name, row): the dummy model's and the dummy LoRA adapter's values.
void fill_row(float* dst, int64_t n, uint64_t seed, const std::string& name, int64_t row, float center, float spread);
// The dummy writers' tensor bytes from fill_row: `rows` rows of `cols` values uniform in +-spread,
// quantized to `type` row by row over the pool (a 3-D tensor's matrices are rows after rows); and n
// float32 values around `center` (1-D, or any shape read as one row).
GgufWriter::Producer dummy_rows(std::shared_ptr<ThreadPool> pool, uint64_t seed, const std::string& name, int64_t rows,
                                int64_t cols, DType type, float spread);
GgufWriter::Producer dummy_f32(uint64_t seed, const std::string& name, int64_t n, float center, float spread);
// The family dummies' tensors (dummy_classic.cpp, dummy_gemma4.cpp) through those producers: matrices of
// `type` (F16 where a row does not fill whole blocks of it) and F32 vectors around a center.
struct DummyTensors {
  GgufWriter& w;
  std::shared_ptr<ThreadPool> pool;
  uint64_t seed;
  DType type;
  // the options' spreads: matrices (default +-0.035) and the embedding / output (+-0.05); a pool of
  // o.threads (0: all cores)
  static DummyTensors for_options(GgufWriter& w, const DummyOptions& o);
  float spread = 0.035f, e_spread = 0.05f;
  Status matrix(const std::string& name, int64_t rows, int64_t cols, float spread) const;
  Status f32(const std::string& name, int64_t n, float center, float spread) const;
  // n experts' matrices of rows x cols as one 3-D tensor (GGUF's ffn_*_exps)
  Status experts(const std::string& name, int64_t n, int64_t rows, int64_t cols, float spread) const;
};

// The family writers that write every matrix in --dtype (classic, mamba, gemma4, deci, phimoe, afmoe): an error
// naming the arch unless dtype is F32, F16, BF16, Q8_0, Q4_0, IQ4_NL or MXFP4.
Status dummy_whole_file_dtype(DType dtype, const std::string& arch);
// The family writers' common keys: general.architecture, name, file_type (and quantization_version for
// block types), and {arch}.context_length / embedding_length / block_count.
void dummy_header(GgufWriter& w, const ModelShape& s, DType dtype);
// ... and the keys of a model whose layers are all alike (phimoe, afmoe): {arch}.feed_forward_length,
// attention.head_count / head_count_kv / layer_norm_rms_epsilon, rope.freq_base and rope.dimension_count
// (n_rot, or head_dim when 0).
void dummy_uniform_layer_keys(GgufWriter& w, const ModelShape& s);

// Writes a GGUF that tokenmill and llama.cpp load. Same options and seed => identical bytes.
Status write_dummy_model(const DummyOptions& opts, const std::string& out_path);

// Encoders (convert/dummy_encoder.cpp): bert, nomic-bert, jina-bert-v2.
bool is_encoder_dummy_arch(const std::string& arch);
Status write_dummy_encoder(const DummyOptions& opts, const std::string& out_path);
// Attention-free stacks (convert/dummy_mamba.cpp): mamba (Mamba-1: ssm_dt_rank, ssm_dt_b_c_rms) and mamba2.
bool is_mamba_dummy_arch(const std::string& arch);
Status write_dummy_mamba(const DummyOptions& opts, const std::string& out_path);
// The classic families (convert/dummy_classic.cpp): gpt2, starcoder, gptneox, falcon, bloom, mpt, olmo, baichuan,
// chatglm, codeshell, jais, jais2, plamo, refact, nemotron, qwen.
bool is_classic_dummy_arch(const std::string& arch);
Status write_dummy_classic(const DummyOptions& opts, const std::string& out_path);
// Gemma 4 (convert/dummy_gemma4.cpp).
Status write_dummy_gemma4(const DummyOptions& opts, const std::string& out_path);
// DeciLM / Nemotron NAS models and OpenELM (convert/dummy_deci.cpp).
Status write_dummy_deci(const DummyOptions& opts, const std::string& out_path);
// Phi-3.5-MoE (convert/dummy_phimoe.cpp).
Status write_dummy_phimoe(const DummyOptions& opts, const std::string& out_path);
// AFMoE, Arcee's Trinity (convert/dummy_afmoe.cpp).
Status write_dummy_afmoe(const DummyOptions& opts, const std::string& out_path);
// --vocab: the GGUF whose tokenizer.* keys a dummy copies (null when `path` is empty), refused without
// tokenizer.ggml.tokens; its token count; and the copy of its tokenizer.* keys into w.
Result<std::unique_ptr<GgufFile>> open_dummy_vocab(const std::string& path);
int64_t dummy_vocab_size(const GgufFile& vocab);
void copy_tokenizer_keys(const GgufFile& vocab, GgufWriter& w);
// The general.file_type (llama.cpp's llama_ftype) of a dummy whose matrices are all `t` (F32, F16, BF16,
// Q8_0, Q4_0, IQ4_NL, MXFP4).
uint32_t dummy_file_type(DType t);
// The synthetic llama-style vocabulary of n_vocab tokens decoder dummies get without --vocab.
void dummy_synthetic_vocab(GgufWriter& w, int64_t n_vocab);
// "none" 0, "mean" 1, "cls" 2, "last" 3, "rank" 4 (llama.cpp's llama_pooling_type); else an error.
Result<int> dummy_pooling_value(const std::string& pooling);

}  // namespace tmill
