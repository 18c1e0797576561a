// Model hyper-parameters read from GGUF metadata, and the per-family description each
// architecture file (arch_*.cpp) registers.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "formats/gguf.h"

namespace tmill {

enum class RopeLayout {
  Adjacent,  // rotate pairs (2i, 2i+1): GGUF "llama" (ggml rope mode NORM)
  NeoX,      // rotate halves (i, i + n_rot/2): qwen2/qwen3 (ggml rope mode NEOX)
};

// Llama3: rope_freqs.weight divides the frequencies; LongRope (phi3): rope_factors_short/long.weight;
// Yarn: rope.scaling.type yarn (model/rope.h).
enum class RopeScaling { None, Linear, Llama3, LongRope, Yarn };

// The FFN's gated activation: SwiGLU (silu(gate) * up) or GeGLU (gelu(gate) * up, the tanh
// approximation as ggml computes it: gemma2/gemma3); an ungated FFN's (ArchSpec::ffn_ungated): GELU
// (starcoder2, phi2), ReLU squared (arcee) or xIELU with per-layer parameters (apertus:
// ModelConfig::XIelu).
enum class FfnActivation { Silu, GeluTanh, ReluSqr, XIelu };

struct ModelConfig;

// What distinguishes one transformer family from another. Registered by src/model/arch_*.cpp.
struct ArchSpec {
  std::string name;          // general.architecture value ("llama", "qwen2", "qwen3")
  RopeLayout rope_layout;
  bool qkv_bias;             // q/k/v projections carry a bias (qwen2)
  bool qk_norm;              // RMSNorm over each q/k head before RoPE (qwen3)
  // q/k/v may come as one attn_qkv tensor and gate/up as one ffn_up tensor of 2*n_ff rows, gate
  // first (phi3); the loader splits them into row views.
  bool fused_qkv_ffn = false;
  // olmoe: attn_q_norm / attn_k_norm span the whole q (n_head*head_dim) and k (kv_dim) vectors
  // instead of one head.
  bool qk_norm_full = false;
  // hunyuan-dense: the per-head q/k norms come after RoPE instead of before it
  bool qk_norm_after_rope = false;
  // Mixture of experts (model/moe.h). Every family here routes as llama.cpp's build_moe_ffn with
  // softmax gating: softmax over all experts' router logits, the top expert_used_count by
  // probability, their probabilities as weights.
  enum class Moe { None, Optional, Required } moe = Moe::None;  // Optional: experts when expert_count > 1 (llama/Mixtral)
  bool moe_norm_topk = false;      // renormalize the chosen weights to sum 1 (qwen3moe, Mixtral)
  bool moe_expert_ff_key = false;  // expert_feed_forward_length, else n_ff / n_expert_used (qwen2moe/qwen3moe); else n_ff
  bool moe_shared_expert = false;  // qwen2moe: + sigmoid(ffn_gate_inp_shexp . x) * SwiGLU_shexp(x)
  // glm4moe: + SwiGLU_shexp(x) with no gate, ModelConfig::n_ff_shexp rows (none when that is 0)
  bool moe_shared_ungated = false;
  // glm4moe (DeepSeek-V3's routing): the family reads {arch}.expert_gating_func itself (softmax or
  // sigmoid: ModelConfig::moe_sigmoid), and each MoE layer has exp_probs_b.bias, a per-expert bias
  // added to the gate scores to choose the experts, not to weight them.
  bool moe_gating_key = false;
  bool moe_selection_bias = false;
  bool moe_selection_bias_required = true;  // (deepseek2: loaded when present)
  // command-r / cohere2: LayerNorm (mean subtracted, weight, no bias; eps attention.layer_norm_epsilon,
  // kept in ModelConfig::rms_eps) in place of every RMSNorm, and the parallel block: attention and FFN
  // both read the layer's one normed input, and both outputs are added to the residual stream.
  bool layer_norm = false;
  bool parallel_block = false;
  // starcoder2: the LayerNorms have biases (attn_norm.bias, ffn_norm.bias, output_norm.bias; phimoe: its RMS
  // norms have them, added after the weight); the FFN
  // is ungated -- down(act(up x + up_b)) + down_b -- with those biases (ffn_act: its activation).
  bool norm_bias = false;
  bool ffn_ungated = false;
  bool ffn_bias = false;
  bool output_bias = false;  // phi2: output.bias added to the logits
  bool output_required = false;  // phi2, stablelm: an untied output.weight (llama.cpp requires it)
  // apertus: attn_q_norm.bias / attn_k_norm.bias are read when present and not used (llama.cpp's graph
  // leaves them out)
  bool qk_norm_bias_unused = false;
  // deepseek2: multi-head latent attention (ModelConfig::mla_*, model/mla.h); attention.value_length
  // is the latent's width, not the head's.
  bool mla = false;
  // lfm2: the layers whose attention.head_count_kv entry is 0 are gated short convolutions
  // (ModelConfig::shortconv_l, model/shortconv.h) instead of attention; the final norm is
  // output_norm_name.
  bool shortconv = false;
  // granitehybrid: the layers whose attention.head_count_kv entry is 0 are Mamba-2 mixers
  // (ModelConfig::ssm_*, model/mamba2.h) instead of attention.
  bool ssm = false;
  // qwen35 / qwen35moe: the recurrent layers are gated delta nets (model/gated_delta_net.h) instead of
  // Mamba-2 mixers, marked by attention.recurrent_layers or every full_attention_interval-th layer
  // being attention (ModelConfig::ssm_* then name: d_inner the values' width, d_state a head's
  // dimension, n_head the value heads, n_group the key heads).
  bool gated_delta_net = false;
  // qwen3next: the value heads come grouped by key head (value head h reads key head h / (value heads /
  // key heads)), as Qwen3-Next's checkpoints order them; qwen35's converter tiles them (h % key heads).
  // Its beta and alpha projections are one ssm_ba, [beta, alpha] per key head's group; files
  // from before llama.cpp split q/k/v/z have one ssm_in, [q, k, v, z] per group (model.cpp regroups both).
  bool gdn_grouped_heads = false;
  // qwen35: the q projection is twice as wide, each head's queries followed by as many gate values;
  // the attention's output times sigmoid(gate) goes into attn_output.
  bool attn_output_gate = false;
  // afmoe: a separate projection of the attention's input, attn_gate.weight (q_dim rows), gates the
  // attention's output the same way (times sigmoid(attn_gate x), before attn_output).
  bool attn_gate_proj = false;
  // nemotron_h: each layer is one block behind its attn_norm -- a Mamba-2 mixer (attention.head_count_kv
  // and feed_forward_length entries 0), attention without RoPE (feed_forward_length 0) or an FFN
  // (head_count_kv 0) -- added to the residual stream (ModelConfig::has_mixer / has_ffn).
  bool single_block_layers = false;
  // falcon-h1: every layer runs attention and a Mamba-2 mixer side by side on its attn_norm's output,
  // the two outputs summed into the residual stream (ModelConfig: every layer is_ssm and has_attention;
  // its K/V and its sequence state share the layer's cache slot), then the FFN.
  bool parallel_ssm = false;
  // mamba, mamba2: no attention and no FFN -- every layer one mixer behind its attn_norm, added to the
  // residual stream; mamba1: the mixers are Mamba-1's (model/mamba1.h) instead of Mamba-2's.
  bool attention_free = false;
  bool mamba1 = false;
  // gpt2, starcoder (mpt: when the file has it): learned absolute positions, position_embd.weight's row
  // p added to the token embedding at position p (ModelConfig::n_pos_embd rows: no position past them).
  bool pos_embd = false;
  bool pos_embd_required = true;
  // bloom: a LayerNorm with a bias (token_embd_norm) on the token embeddings
  bool embd_norm = false;
  // falcon: attention reads this second norm of the layer's input when the file has it (Falcon-40B's
  // attn_norm_2), the parallel FFN then reads attn_norm's; without it both read attn_norm's.
  std::string attn_norm_alt = {};
  // gptneox: in the parallel block (its use_parallel_residual) the FFN reads its own norm of the
  // layer's input (ffn_norm), not the attention's
  bool parallel_ffn_norm = false;
  // olmo: LayerNorms without weights or biases (the loader gives them weights of 1)
  bool norm_weightless = false;
  // gemma-embedding (EmbeddingGemma): attention is bidirectional -- every position of a sequence sees
  // the whole sequence (a sliding layer: the positions within window / 2 on either side, llama.cpp's
  // symmetric window), so the model only embeds (model/embedder.h): it never generates, and only a
  // forward over whole sequences (pos_begin 0, every K/V stored before attention) computes it.
  bool bidirectional = false;
  // mpt: the LayerNorms' and the FFN's biases are read when the file has them
  bool optional_biases = false;
  // gemma4: per-layer geometry (ModelConfig::layer_shape): attention.head_count_kv and
  // feed_forward_length may hold a value per layer, the sliding layers have their own head size
  // (attention.key_length_swa) and RoPE dimensions (rope.dimension_count_swa).
  bool layer_geometry = false;
  // deci (Llama-3.1-Nemotron-51B / -Ultra-253B, Nemotron Super 49B): attention.head_count is per layer too,
  // and zeros mark layer kinds -- head_count 0: no attention (the layer is its FFN), head_count_kv 0 with
  // heads: "linear attention" (attn_output over the normed input, no K/V), feed_forward_length 0: no FFN.
  bool variable_layers = false;
  // gemma4: each V head RMS-normalized without a weight before it is cached; attn_v.weight may be absent
  // (the layer's V is then its K projection, before K's norm and RoPE).
  bool v_norm = false;
  bool v_optional = false;
  std::string output_norm_name = "output_norm";
  FfnActivation ffn_act = FfnActivation::Silu;
  // attn_post_norm / ffn_post_norm: RMSNorm of the attention and FFN outputs before the residual add
  // (gemma2/gemma3); the loader requires them, the forward applies whatever a layer has.
  bool post_norms = false;
  // gpt-oss (llama.cpp's LLM_ARCH_OPENAI_MOE): the top-k by raw router logit, their weights a softmax
  // over those k logits (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT); router and experts carry biases
  // (ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias); the experts' activation is the clamped SwiGLU
  // (model/moe.h swiglu_oai: alpha 1.702, limit 7).
  bool moe_softmax_topk = false;
  bool moe_biases = false;
  bool moe_swiglu_oai = false;
  // nemotron_h_moe: the experts and the shared expert have no gate (ffn_up / ffn_down only) and take
  // the FFN's activation (ffn_act: ReLU squared)
  bool moe_ungated = false;
  // gemma4 (26B-A4B): an expert layer keeps its dense FFN beside the experts, each part normed on its own
  // (post_ffw_norm_1 / pre_ffw_norm_2 / post_ffw_norm_2), the router reading its own norm of the input
  bool moe_beside_dense = false;
  // gpt-oss: attn_output.bias, per-head learned sink logits (attn_sinks) in the attention softmax, the
  // FFN's pre-norm named post_attention_norm.
  bool attn_out_bias = false;
  bool attn_sinks = false;
  std::string ffn_norm_name = "ffn_norm";
  std::string ffn_norm_suffix = ".weight";  // falcon-h1: "" (its converter names the tensor blk.N.ffn_norm)
  // olmo2: no RMSNorm before attention and FFN (attn_norm / ffn_norm absent): each block reads the
  // residual stream as it is, and its output is normed after (post_norms) instead.
  bool pre_norms = true;
  // The family's own metadata (sliding windows, soft-capping, per-layer RoPE bases, embedding scale:
  // arch_gemma*.cpp, arch_llama.cpp, arch_gptoss.cpp), read after the common keys into ModelConfig's
  // generic fields.
  Status (*read_family)(const GgufFile& f, ModelConfig& c) = nullptr;
};

// How a layer turns positions into RoPE angles: llama.cpp's ggml_rope_ext parameters (model/rope.h
// computes them; the reference and the batched forward both use that one definition).
struct RopeParams {
  float theta = 10000.0f;   // freq_base
  float freq_scale = 1.0f;  // linear scaling and YaRN: 1 / rope.scaling.factor
  // YaRN (ext_factor 1): frequencies between the corr dims of beta_fast/beta_slow (over n_ctx_orig)
  // blend interpolation and extrapolation, and cos/sin gain 1 + 0.1 ln(1 / freq_scale).
  bool yarn = false;
  float beta_fast = 32.0f, beta_slow = 1.0f;
  int64_t n_ctx_orig = 0;
  float attn_factor = 1.0f;  // rope.scaling.attn_factor: multiplies cos/sin
  // M-RoPE for text tokens (read_mrope_sections): the rotation pairs on the fourth section, whose
  // position is 0 for text, keep angle 0 (cos/sin still times the attention factor); empty: none.
  std::vector<uint8_t> still;
  bool still_pair(int64_t i) const { return static_cast<size_t>(i) < still.size() && still[static_cast<size_t>(i)]; }
  // The dimensions it rotates (0: ModelConfig::n_rot) and whether the file's frequency factors
  // (rope_freqs / LongRoPE) divide its frequencies: gemma4's sliding layers rotate their whole (narrower)
  // head without them, its full layers the wide head with them.
  int64_t n_rot = 0;
  bool freq_factors = true;
  bool operator==(const RopeParams&) const = default;
};

// One layer's attention: the positions it sees and its RoPE.
struct LayerAttention {
  int64_t window = 0;  // a query at p sees keys at (p - window, p]; 0 = every previous position
  int rope = 0;        // index into ModelConfig::ropes; -1: no RoPE at all (smollm3's NoPE layers)
  // llama4's chunked attention: a query at p sees keys at [p - p % chunk, p]; 0 = none
  int64_t chunk = 0;
  // The first position a query at `pos` sees.
  int64_t first(int64_t pos) const {
    if (window > 0) return pos + 1 > window ? pos + 1 - window : 0;
    return chunk > 0 ? pos - pos % chunk : 0;
  }
  // The keys [first, end) a query at `pos` of a sequence of `len` positions sees: causal, those up to
  // pos from first(pos); bidirectional (ArchSpec::bidirectional), the whole sequence, or with a window
  // those within window / 2 on either side (llama.cpp's LLAMA_SWA_TYPE_SYMMETRIC).
  struct Keys {
    int64_t first, end;
  };
  Keys keys(int64_t pos, int64_t len, bool bidirectional) const {
    if (!bidirectional) return {first(pos), pos + 1};
    if (window <= 0) return {0, len};
    const int64_t half = window / 2;
    return {pos > half ? pos - half : 0, pos + half + 1 < len ? pos + half + 1 : len};
  }
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
  // LongRoPE (phi3): rope_factors_short/long.weight divide the frequencies; the long ones apply when
  // the context served exceeds n_ctx_orig. attn_factor multiplies cos/sin (rope.scaling.attn_factor,
  // as llama.cpp applies it: to the rotated dimensions of q and k).
  int64_t n_ctx_orig = 0;          // rope.scaling.original_context_length, else n_ctx_train
  float rope_attn_factor = 1.0f;
  bool tied_output = false;        // output projection shares token_embd
  // Per-layer attention (every layer: window 0, ropes[0] unless the family's reader says otherwise)
  // and the distinct RoPE parameter sets (ropes[0]: the file's global RoPE; gemma3's sliding layers
  // add their own base).
  std::vector<LayerAttention> layer_attn;
  std::vector<RopeParams> ropes;
  int64_t n_swa = 0;               // the sliding window of the windowed layers (0: none)
  // gemma: token embeddings times sqrt(n_embd); q.k scale (default 1/sqrt(head_dim)); soft-capping
  // cap * tanh(x / cap) of the attention scores and of the logits (0 = none).
  float embd_scale = 1.0f;
  float attn_scale = 0.0f;
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  // granite: each block's output (attention, FFN) times residual_scale before the residual add, and
  // the logits divided by logit_scale (llama.cpp's f_residual_scale, f_logit_scale; 1 = none).
  float residual_scale = 1.0f;
  float logit_scale = 1.0f;
  // mistral3 (Llama 4's attention temperature): queries at position p times
  // 1 + attn_temp_scale * ln(floor(p / attn_temp_floor) + 1); 0 = none.
  float attn_temp_scale = 0.0f;
  int64_t attn_temp_floor = 0;
  // llama4: the temperature on the layers without RoPE only, its positions offset by one
  bool attn_temp_nope_only = false;
  float attn_temperature_at(int64_t layer, int64_t pos) const {
    if (attn_temp_scale == 0.0f || (attn_temp_nope_only && has_rope(layer))) return 1.0f;
    return attn_temperature_factor(pos + (attn_temp_nope_only ? 1 : 0), attn_temp_scale, attn_temp_floor);
  }
  // apertus's xIELU (FfnActivation::XIelu), per layer, as ggml_xielu takes them: x > 0: ap x^2 + beta x;
  // else (expm1(min(x, eps)) - x) an + beta x, with ap = softplus(alpha_p), an = beta + softplus(alpha_n)
  struct XIelu {
    float an = 0, ap = 0, beta = 0, eps = 0;
    float operator()(float x) const {
      return x > 0.0f ? ap * x * x + beta * x : (std::expm1(std::fmin(x, eps)) - x) * an + beta * x;
    }
  };
  std::vector<XIelu> xielu;
  // llama4: q and k RMS-normalized without a weight (an L2 norm) after RoPE, on the RoPE layers
  bool kq_l2_norm = false;
  // Learned absolute positions (ArchSpec::pos_embd): the rows of position_embd.weight (the positions a
  // sequence may reach; 0: no such limit).
  int64_t n_pos_embd = 0;
  // ALiBi (bloom, mpt, baichuan 13B, refact): per query head a slope m_h, and the score of a key j
  // positions before the query gets - m_h * j (llama.cpp's mask -|p0 - p1| times ggml's slope for
  // f_max_alibi_bias); empty: none. set_alibi fills it.
  std::vector<float> alibi;
  // mpt, olmo: q, k and v clamped to [-clamp_kqv, clamp_kqv] after their biases (0: none)
  float clamp_kqv = 0.0f;
  static float attn_temperature_factor(int64_t pos, float scale, int64_t floor_len) {
    return std::log(std::floor(static_cast<float>(pos) / static_cast<float>(floor_len)) + 1.0f) * scale + 1.0f;
  }
  // Mixture of experts (0 experts: a dense FFN). n_ff_exp: rows of each expert's gate/up;
  // n_ff_shexp: the shared expert's (qwen2moe).
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
  bool is_moe() const { return n_expert > 0; }
  // glm4moe: the first n_layer_dense_lead layers have a dense FFN (n_ff rows), the rest experts; the
  // gate scores are sigmoid(logit) instead of a softmax; the chosen weights times moe_weights_scale
  // (llama.cpp's expert_weights_scale, after the renormalization).
  int64_t n_layer_dense_lead = 0;
  bool moe_sigmoid = false;
  float moe_weights_scale = 1.0f;
  // llama4: experts every moe_layer_step-th layer (layers l with (l + 1) % step == 0), dense ones between
  int64_t moe_layer_step = 1;
  // jamba: the expert layers as the file has them (a router tensor), 1 per layer; empty: the rules above
  std::vector<uint8_t> moe_layer;
  bool layer_is_moe(int64_t layer) const {
    if (!moe_layer.empty()) return n_expert > 0 && moe_layer[static_cast<size_t>(layer)] != 0;
    return n_expert > 0 && layer >= n_layer_dense_lead && (layer + 1) % moe_layer_step == 0;
  }
  // How a token's experts are chosen and weighted (model/moe.h moe_route_token, ref::moe_route).
  struct MoeGate {
    bool norm = false;          // renormalize the chosen weights to sum 1 (ArchSpec::moe_norm_topk)
    bool softmax_topk = false;  // gpt-oss (ArchSpec::moe_softmax_topk)
    bool sigmoid = false;       // moe_sigmoid
    float scale = 1.0f;         // moe_weights_scale
    // grouped routing (DeepSeek-V3): the experts in `groups` equal groups, each scored by the sum of
    // its two best (biased) scores; only the best groups_used groups' experts may be chosen
    int64_t groups = 1, groups_used = 1;
    // llama4: the choice by raw logit (the weights still the scores), and each chosen expert's
    // weight applied to its input instead of its output
    bool select_by_logit = false, weight_before = false;
  };
  int64_t moe_groups = 1, moe_groups_used = 1;  // expert_group_count, expert_group_used_count
  bool moe_select_by_logit = false, moe_weight_before = false;
  MoeGate moe_gate() const {
    return {arch.moe_norm_topk, arch.moe_softmax_topk, moe_sigmoid, moe_weights_scale, moe_groups, moe_groups_used,
            moe_select_by_logit, moe_weight_before};
  }
  // deepseek2's multi-head latent attention, absorbed (model/mla.h): the cache holds n_head_kv = 1
  // head of head_dim = mla_kv_rank (the normed latent) + n_rot (RoPE) dimensions per token, V = K;
  // a query head is [attn_k_b x q_nope (mla_kv_rank) | q_pe (n_rot)], q_nope being mla_nope wide; the
  // attention's latent output goes through attn_v_b per head (mla_v rows) into attn_output.
  // mla_q_rank: the q projection's low rank (attn_q_a / attn_q_b), 0: one attn_q (V2-Lite).
  int64_t mla_kv_rank = 0, mla_q_rank = 0, mla_nope = 0, mla_v = 0;
  bool is_mla() const { return mla_kv_rank > 0; }
  // The width of the q projection's output and of attn_output's input.
  int64_t q_proj_dim() const {
    return is_mla() ? n_head * (mla_nope + n_rot) : arch.attn_output_gate ? 2 * q_dim() : q_dim();
  }
  int64_t attn_out_dim() const { return is_mla() ? n_head * mla_v : q_dim(); }

  // lfm2's gated short convolutions (ArchSpec::shortconv): the kernel's length (shortconv.l_cache; a
  // token's output mixes its own and the shortconv_l - 1 previous tokens' inputs) and, per layer, 1 for
  // a convolution layer (no attention, no K/V). cache_slot: each layer's index among the layers of its
  // kind -- its K/V in the paged cache (KvStorage::view) or its convolution state (conv_state).
  int64_t shortconv_l = 0;
  std::vector<uint8_t> conv_layer;
  std::vector<int32_t> cache_slot;
  bool is_conv(int64_t layer) const { return !conv_layer.empty() && conv_layer[static_cast<size_t>(layer)] != 0; }
  int64_t n_conv_layers() const {
    int64_t n = 0;
    for (uint8_t v : conv_layer) n += v;
    return n;
  }
  // Mamba-2 mixers (ArchSpec::ssm, model/mamba2.h), llama.cpp's ssm.* keys: the convolution's length
  // (ssm_d_conv), the inner width (d_inner = n_head x head_dim), the state per head dimension
  // (d_state), the heads (time_step_rank) and the groups sharing B and C. ssm_layer: 1 for a mixer
  // layer (no attention, no K/V); its cache_slot indexes the sequence state (KvStorage::seq_state).
  int64_t ssm_d_conv = 0, ssm_d_inner = 0, ssm_d_state = 0, ssm_n_head = 0, ssm_n_group = 0;
  // Mamba-1 (ArchSpec::mamba1): the rank of dt's projection (time_step_rank; its heads are its d_inner
  // channels, one dimension each, and it has no groups: ssm_n_group 0), and RMS norms without weights
  // on dt, B and C (falcon-mamba's ssm.dt_b_c_rms)
  int64_t ssm_dt_rank = 0;
  bool ssm_dt_b_c_rms = false;
  std::vector<uint8_t> ssm_layer;
  bool is_ssm(int64_t layer) const { return !ssm_layer.empty() && ssm_layer[static_cast<size_t>(layer)] != 0; }
  bool is_gdn(int64_t layer) const { return arch.gated_delta_net && is_ssm(layer); }
  // The key head a gated delta net's value head h reads (ArchSpec::gdn_grouped_heads).
  int64_t gdn_key_head(int64_t h) const {
    return arch.gdn_grouped_heads ? h / (ssm_n_head / ssm_n_group) : h % ssm_n_group;
  }
  int64_t n_ssm_layers() const {
    int64_t n = 0;
    for (uint8_t v : ssm_layer) n += v;
    return n;
  }
  int64_t ssm_head_dim() const { return ssm_d_inner / ssm_n_head; }
  // the convolution's channels (x, B, C; the gated delta net's q, k, v) and Mamba-2's in-projection's
  // rows (z, x, B, C, dt)
  int64_t ssm_conv_dim() const { return ssm_d_inner + 2 * ssm_n_group * ssm_d_state; }
  int64_t ssm_in_dim() const { return arch.mamba1 ? 2 * ssm_d_inner : ssm_d_inner + ssm_conv_dim() + ssm_n_head; }
  // Floats of one sequence's state in one mixer layer: the convolution's last ssm_d_conv - 1 inputs,
  // then the SSM state (head, head dimension, d_state).
  int64_t ssm_state_floats() const { return (ssm_d_conv - 1) * ssm_conv_dim() + ssm_d_inner * ssm_d_state; }
  // nemotron_h (ArchSpec::single_block_layers): 1 for a layer without an FFN (a mixer or attention),
  // and 1 for one that is only an FFN; empty for the other families (every layer has both).
  std::vector<uint8_t> no_ffn, ffn_only;
  bool has_ffn(int64_t layer) const { return no_ffn.empty() || no_ffn[static_cast<size_t>(layer)] == 0; }
  bool has_mixer(int64_t layer) const { return ffn_only.empty() || ffn_only[static_cast<size_t>(layer)] == 0; }
  int64_t n_ffn_only_layers() const {
    int64_t n = 0;
    for (uint8_t v : ffn_only) n += v;
    return n;
  }
  // A layer with attention (K/V in the cache): not a convolution, a mixer in its place or an FFN alone --
  // falcon-h1's layers have both attention and a mixer.
  bool has_attention(int64_t layer) const {
    return has_mixer(layer) && !is_conv(layer) && !is_linear_attn(layer) && (!is_ssm(layer) || arch.parallel_ssm);
  }
  int64_t n_kv_layers() const {
    if (arch.parallel_ssm) return n_layer;
    int64_t linear = 0;
    for (uint8_t v : linear_attn) linear += v;
    return n_layer - n_conv_layers() - n_ssm_layers() - n_ffn_only_layers() - linear -
           (kv_shared_from > 0 ? n_layer - kv_shared_from : 0);
  }
  int64_t slot(int64_t layer) const { return cache_slot.empty() ? layer : cache_slot[static_cast<size_t>(layer)]; }
  // gemma4's shared K/V: the layers from kv_shared_from on (0: none) compute no K/V; each reads the
  // cache of an earlier layer of its kind (cache_slot: llama.cpp's choice, the last sliding or the last
  // full layer before kv_shared_from) and stores nothing.
  int64_t kv_shared_from = 0;
  bool stores_kv(int64_t layer) const { return kv_shared_from == 0 || layer < kv_shared_from; }

  // Per-layer geometry (ArchSpec::layer_geometry, gemma4): one entry per layer, or empty when every layer
  // has head_dim, n_head_kv, n_rot and n_ff. With entries, those four hold the largest of any layer (the
  // scratch's sizes) and each layer's own come from the accessors below.
  struct LayerShape {
    int64_t head_dim, n_head_kv, n_rot, n_ff;
    int64_t n_head = 0;  // (0: ModelConfig::n_head; deci's attention-free layers are marked in ffn_only)
  };
  std::vector<LayerShape> layer_shape;
  int64_t head_dim_of(int64_t l) const { return layer_shape.empty() ? head_dim : layer_shape[static_cast<size_t>(l)].head_dim; }
  int64_t n_head_kv_of(int64_t l) const {
    return layer_shape.empty() ? n_head_kv : layer_shape[static_cast<size_t>(l)].n_head_kv;
  }
  int64_t n_rot_of(int64_t l) const { return layer_shape.empty() ? n_rot : layer_shape[static_cast<size_t>(l)].n_rot; }
  int64_t n_ff_of(int64_t l) const { return layer_shape.empty() ? n_ff : layer_shape[static_cast<size_t>(l)].n_ff; }
  int64_t n_head_of(int64_t l) const {
    return layer_shape.empty() || layer_shape[static_cast<size_t>(l)].n_head == 0 ? n_head
                                                                                  : layer_shape[static_cast<size_t>(l)].n_head;
  }
  int64_t q_dim_of(int64_t l) const { return n_head_of(l) * head_dim_of(l); }
  int64_t kv_dim_of(int64_t l) const { return n_head_kv_of(l) * head_dim_of(l); }
  int64_t gqa_group_of(int64_t l) const { return n_head_of(l) / n_head_kv_of(l); }
  // deci's "linear attention" layers: attn_output over the normed input, no K/V
  std::vector<uint8_t> linear_attn;
  bool is_linear_attn(int64_t l) const { return !linear_attn.empty() && linear_attn[static_cast<size_t>(l)] != 0; }
  // gemma4's per-layer embeddings (per_layer_token_embd and friends; 0: none): each layer's input width
  int64_t n_embd_per_layer = 0;

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  int64_t gqa_group() const { return n_head / n_head_kv; }
  bool has_rope(int64_t layer) const { return layer_attn[static_cast<size_t>(layer)].rope >= 0; }
};

// Reads and validates the hyper-parameters ({arch}.* keys). Errors name the missing/invalid key.
Result<ModelConfig> read_model_config(const GgufFile& file);

// For the families' readers (ArchSpec::read_family): {arch}.attention.sliding_window (`def` when
// absent; 0 = none) applied to the layers llama.cpp makes sliding: an explicit
// {arch}.attention.sliding_window_pattern (a bool per layer, or every Nth layer dense), else every
// `pattern`th layer dense (layer il slides when il % pattern < pattern - 1; pattern 0: all slide).
// Returns whether a window was set.
Result<bool> read_sliding_window(const GgufFile& f, ModelConfig& c, int64_t def, int64_t pattern);
// Gives the sliding-window layers their own RoPE `r` (ModelConfig::ropes[1]) when it differs from the
// global one; the first form: the global one's YaRN and attention factor with base `theta` and
// `freq_scale` (gemma2/gemma3; olmo2 gives plain RoPE).
void set_sliding_rope(ModelConfig& c, float theta, float freq_scale);
void set_sliding_rope(ModelConfig& c, const RopeParams& r);
// DeepSeek-style experts as llama.cpp reads them for glm4moe, deepseek2, dots1 and bailingmoe2:
// read_expert_gating, expert_shared_count (required; ungated shared experts of count x n_ff_exp rows)
// and read_expert_weighting. Its parts, for the families that read only some:
// {arch}.expert_gating_func (1 softmax, 2 sigmoid; absent: `default_gating`, 0 meaning required) and
// leading_dense_block_count (lfm2moe, exaone-moe); expert_weights_scale (0 / absent: none) and
// expert_weights_norm (exaone-moe).
Status read_deepseek_moe(const GgufFile& f, ModelConfig& c, int64_t default_gating);
Status read_expert_gating(const GgufFile& f, ModelConfig& c, int64_t default_gating);
Status read_expert_weighting(const GgufFile& f, ModelConfig& c);
// The ArchSpec flags of DeepSeek-style experts: required, expert_feed_forward_length rows, ungated
// shared experts, the family's own gating key, a selection bias loaded when present.
void set_deepseek_style_moe(ArchSpec& s);
// The GPT-style layer's pieces (starcoder2, phi2, gpt2, starcoder, gptneox, codeshell, bloom, mpt):
// LayerNorms with biases (eps attention.layer_norm_epsilon), the ungated GELU FFN with its biases,
// attn_output's bias.
void set_gpt_layer(ArchSpec& s);
// A family reader (ArchSpec::read_family) for those llama.cpp asserts rotate the whole head (falcon,
// codeshell, jais2, plamo): an error naming {arch}.rope.dimension_count when it is less.
Status read_whole_head_rope(const GgufFile& f, ModelConfig& c);
// {arch}.attention.max_alibi_bias (mpt, jais; absent: 0): ALiBi with it when positive (set_alibi), else
// no positions at all (set_no_rope); an error unless finite and not negative.
Status read_alibi_key(const GgufFile& f, ModelConfig& c);
// {arch}.attention.clamp_kqv into ModelConfig::clamp_kqv (mpt, olmo; absent: 0, none); an error unless
// finite and not negative.
Status read_clamp_kqv(const GgufFile& f, ModelConfig& c);
// llama.cpp's M-RoPE (ggml_rope_multi) over {arch}.rope.dimension_sections, for text tokens: llama.cpp
// gives a text token the same position in the first three sections and 0 in the fourth, so the rotation
// is NeoX RoPE on the pairs in the first three, and no rotation on the pairs in the fourth
// (RopeParams::still, set here on every RoPE of c) -- pair i's section is i % (s0+s1+s2+s3), taken in
// order (sectioned M-RoPE: Qwen2-VL, GLM-4V) or, interleaved (Qwen3-VL, Qwen3.5), h where i % 3 == 1
// and i < 3 s1, w where i % 3 == 2 and i < 3 s2, t where i % 3 == 0 and i < 3 s0, else the fourth.
// (Qwen3-VL's [24, 20, 20] puts pairs 61 and 62 of 64 there: transformers rotates them with the text
// position, llama.cpp does not; their angles are below 1e-6 per position, and the files are llama.cpp's.)
// Returns whether the file uses M-RoPE (llama.cpp's use_mrope: s0 and s1 > 0); absent sections are an
// error when `required`.
Result<bool> read_mrope_sections(const GgufFile& f, ModelConfig& c, bool interleaved, bool required);
// ALiBi's slopes for c.n_head query heads and a maximum bias (ggml's soft_max: with n = the largest power
// of two <= n_head, m0 = 2^(-max_bias / n), m1 = 2^(-max_bias / 2 / n), head h < n gets m0^(h+1), the
// others m1^(2 (h - n) + 1)), and RoPE off on every layer.
void set_alibi(ModelConfig& c, float max_bias);
// Every layer without RoPE (gpt2, bloom, mpt, ...: their positions come from elsewhere).
void set_no_rope(ModelConfig& c);
// An optional float key of the family ({arch}.<key>), `def` when absent.
Result<float> read_family_float(const GgufFile& f, const ModelConfig& c, const std::string& key, float def);
// An integer key of the family ({arch}.<key>) in [min, max]: `def` when absent, an error when absent and
// `def` is nullopt.
Result<int64_t> read_family_int(const GgufFile& f, const ModelConfig& c, const std::string& key,
                                std::optional<int64_t> def, int64_t min, int64_t max);

}  // namespace tmill
