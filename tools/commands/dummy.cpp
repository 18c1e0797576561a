// tokenmill dummy: write a random-weight model of a real shape (like vLLM's --load-format dummy).
#include <algorithm>
#include <cstdio>
#include <string>
#include <memory>

#include "cli_common.h"
#include "convert/dummy.h"
#include "core/log.h"

namespace {
struct DummyCli {
  std::string shape, dtype = "F16", vocab, out, pooling;
  uint64_t seed = 42;
  bool pure = false, list = false, fim = false;
  int threads = 0;
  // explicit dimensions (override or define a shape)
  std::string arch = "llama";
  int64_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_ctx = 0;
  int64_t n_rot = 0, rope_orig_ctx = 0;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
  int64_t n_expert_shared = 0, n_dense_lead = -1;  // glm4moe
  float expert_weights_scale = 0;
  int64_t sliding_window = -1, swa_pattern = 0;
  float std = 0, rope_theta = 0, rope_factor = 0;
  float embd_scale = 0, residual_scale = 0, attn_scale = 0, logit_scale = 0;  // granite
  std::string rope_scaling;
  bool tied = false;
};

TM_COMMAND("dummy", "write a random-weight GGUF model of a real shape", [](CLI::App& app) -> tmill::cli::CommandRun {
  auto o = std::make_shared<DummyCli>();
  app.add_option("--shape", o->shape,
                 "qwen2.5-0.5b, qwen2.5-7b, llama-3.2-1b, llama-3-8b, phi-3.5-mini, olmoe-1b-7b, qwen3-30b-a3b, ... (--list)");
  app.add_option("--dtype", o->dtype, "F32, F16, BF16, Q8_0, Q4_0, IQ4_NL, IQ4_XS, MXFP4, Q2_K or Q3_K")->capture_default_str();
  app.add_option("--vocab", o->vocab, "GGUF file whose tokenizer (tokenizer.* keys) the model gets");
  app.add_option("--seed", o->seed, "random seed (same seed, same bytes)")->capture_default_str();
  app.add_flag("--pure", o->pure, "Q4_0/IQ4_NL/IQ4_XS/MXFP4/Q2_K/Q3_K: keep the output matrix in that type too (default: Q8_0/Q6_K like llama.cpp)");
  app.add_option("--threads", o->threads, "threads (default: all cores)");
  app.add_option("-o,--output", o->out, "output GGUF file");
  app.add_flag("--list", o->list, "list known shapes");
  app.add_option("--arch", o->arch, "architecture for explicit dimensions (llama, qwen2, qwen3, phi3, gemma, gemma2, gemma3, granite, smollm3, olmo2, exaone, exaone4, ernie4_5, glm4, granitemoe, glm4moe, qwen3moe, qwen2moe, "
                 "olmoe, gpt-oss; llama with --n-expert is Mixtral-style; encoders: bert, nomic-bert, jina-bert-v2)");
  app.add_option("--n-vocab", o->n_vocab, "vocabulary size");
  app.add_option("--n-embd", o->n_embd, "hidden size");
  app.add_option("--n-layer", o->n_layer, "layers");
  app.add_option("--n-head", o->n_head, "attention heads");
  app.add_option("--n-head-kv", o->n_head_kv, "KV heads");
  app.add_option("--head-dim", o->head_dim, "head dimension (default n_embd / n_head)");
  app.add_option("--n-ff", o->n_ff, "feed-forward size");
  app.add_option("--n-ctx", o->n_ctx, "context length");
  app.add_option("--n-rot", o->n_rot, "dimensions RoPE rotates per head (default head_dim)");
  app.add_option("--rope-orig-ctx", o->rope_orig_ctx,
                 "phi3: original context of LongRoPE; below --n-ctx the file gets rope_factors_short/long; "
                 "gpt-oss: YaRN's original context");
  app.add_option("--n-expert", o->n_expert, "experts per MoE layer (qwen3moe, qwen2moe, olmoe; llama: Mixtral-style)");
  app.add_option("--n-expert-used", o->n_expert_used, "experts each token is routed to (default 2, at most --n-expert)");
  app.add_option("--n-ff-exp", o->n_ff_exp, "each expert's feed-forward size (default --n-ff; qwen3moe/qwen2moe only differ)");
  app.add_option("--n-ff-shexp", o->n_ff_shexp, "qwen2moe: the shared expert's feed-forward size (default --n-ff)");
  app.add_option("--n-expert-shared", o->n_expert_shared, "glm4moe: shared experts (default 1)");
  app.add_option("--n-dense-lead", o->n_dense_lead, "glm4moe: dense layers before the expert layers (default: the "
                 "shape's; explicit dimensions 1)");
  app.add_option("--expert-weights-scale", o->expert_weights_scale,
                 "glm4moe: the chosen experts' weight scale (expert_weights_scale; default: the shape's, else none)");
  app.add_flag("--tied", o->tied, "tie output and embedding (explicit dimensions; gemma2/gemma3 always are)");
  app.add_option("--sliding-window", o->sliding_window,
                 "sliding-window attention over N positions (gemma2, gemma3, gpt-oss: their sliding layers; llama: every "
                 "layer, as Mistral 7B v0.1); 0: none");
  app.add_option("--swa-pattern", o->swa_pattern,
                 "every Nth layer global (attention.sliding_window_pattern; default: gemma2 2, gemma3 6)");
  app.add_option("--std", o->std, "standard deviation of the weight matrices (default: uniform +-0.035, "
                 "embedding/output +-0.05); larger values make a tiny model's logits less flat");
  app.add_option("--rope-theta", o->rope_theta, "rope.freq_base (explicit dimensions default 10000)");
  app.add_option("--rope-scaling", o->rope_scaling, "rope.scaling.type: linear or yarn (with --rope-factor; "
                 "yarn: --rope-orig-ctx is its original context; gpt-oss default: yarn, factor 32 over 4096), none");
  app.add_option("--rope-factor", o->rope_factor, "rope.scaling.factor");
  app.add_option("--embedding-scale", o->embd_scale, "granite: granite.embedding_scale (default Granite 3.3 2B's 12)");
  app.add_option("--residual-scale", o->residual_scale, "granite: granite.residual_scale (default 0.22)");
  app.add_option("--attention-scale", o->attn_scale, "granite: granite.attention.scale (default 1/64)");
  app.add_option("--logit-scale", o->logit_scale, "granite: granite.logit_scale (default 8); command-r / cohere2: "
                 "the logits' multiplier (default 0.0625)");
  app.add_flag("--fim", o->fim, "a coder model's fill-in-the-middle tokens (<|fim_prefix|>, ... <|file_sep|>) in the "
               "synthetic vocabulary, for /infill");
  app.add_option("--pooling", o->pooling, "embedding models: <arch>.pooling_type none, mean, cls, last or rank (decoders: "
                 "the shape's, else none, a generation model; qwen3 rank: a Qwen3-Reranker with its yes/no head and "
                 "rerank prompt; bert: cls, nomic-bert: mean; rank adds bert's classifier head)");
  return [o] {
    using namespace tmill;
    if (o->list) {
      for (auto& s : known_shapes()) {
        std::string experts;
        if (s.n_expert > 0) {
          experts = " experts=" + std::to_string(s.n_expert_used) + "/" + std::to_string(s.n_expert);
          if (s.n_ff_exp > 0) experts += " ff_exp=" + std::to_string(s.n_ff_exp);
          if (s.n_ff_shexp > 0) experts += " ff_shexp=" + std::to_string(s.n_ff_shexp);
        }
        if (s.n_swa > 0) experts += " window=" + std::to_string(s.n_swa);
        if (!s.rope_scaling.empty()) experts += " rope=" + s.rope_scaling + " x" + std::to_string(static_cast<int>(s.rope_factor));
        if (!s.pooling.empty()) experts += " pooling=" + s.pooling;
        std::printf("%-21s %-8s vocab=%lld embd=%lld layers=%lld heads=%lld/%lld head_dim=%lld ff=%lld ctx=%lld%s%s\n",
                    s.name.c_str(), s.arch.c_str(), (long long)s.n_vocab, (long long)s.n_embd, (long long)s.n_layer,
                    (long long)s.n_head, (long long)s.n_head_kv, (long long)s.head_dim, (long long)s.n_ff,
                    (long long)s.n_ctx, experts.c_str(), s.tied ? " tied" : "");
      }
      return 0;
    }
    if (o->out.empty()) {
      log_error("dummy: -o OUTPUT is required");
      return 2;
    }
    DummyOptions d;
    if (!o->shape.empty()) {
      auto s = find_shape(o->shape);
      if (!s) {
        log_error("unknown shape '{}' (see tokenmill dummy --list)", o->shape);
        return 2;
      }
      d.shape = *s;
    } else {
      d.shape = ModelShape{"custom", o->arch, 32000, 0, 0, 0, 0, 0, 0, 4096, 10000.0f, 1e-5f, o->tied};
    }
    auto& s = d.shape;
    if (o->n_vocab) s.n_vocab = o->n_vocab;
    if (o->n_embd) s.n_embd = o->n_embd;
    if (o->n_layer) s.n_layer = o->n_layer;
    if (o->n_head) s.n_head = o->n_head;
    if (o->n_head_kv) s.n_head_kv = o->n_head_kv;
    if (o->n_ff) s.n_ff = o->n_ff;
    if (o->n_ctx) s.n_ctx = o->n_ctx;
    if (o->n_rot) s.n_rot = o->n_rot;
    if (o->rope_orig_ctx) s.rope_orig_ctx = o->rope_orig_ctx;
    if (o->n_expert) s.n_expert = o->n_expert;
    if (o->n_expert_used) s.n_expert_used = o->n_expert_used;
    if (o->n_ff_exp) s.n_ff_exp = o->n_ff_exp;
    if (o->n_ff_shexp) s.n_ff_shexp = o->n_ff_shexp;
    if (o->n_expert_shared) s.n_expert_shared = o->n_expert_shared;
    if (o->n_dense_lead >= 0) s.n_dense_lead = o->n_dense_lead;
    if (o->expert_weights_scale) s.expert_weights_scale = o->expert_weights_scale;
    if (s.n_expert > 0 && !s.n_expert_used) s.n_expert_used = std::min<int64_t>(2, s.n_expert);
    if (o->shape.empty()) {
      s.arch = o->arch;
      s.tied = o->tied;
      if (!s.n_head_kv) s.n_head_kv = s.n_head;
      if (s.arch == "gemma2") {  // the real models' values, written as their converter does
        s.attn_softcap = 50;
        s.final_softcap = 30;
      }
      if (s.arch == "gemma3") s.rope_theta_swa = 10000;
      if ((s.arch == "glm4" || s.arch == "glm4moe") && !s.n_rot && s.n_head)
        s.n_rot = (o->head_dim ? o->head_dim : s.n_embd / s.n_head) / 2;
      if (s.arch == "glm4moe" && o->n_dense_lead < 0) s.n_dense_lead = 1;
      if (s.arch == "granite" || s.arch == "granitemoe") {  // Granite 3.3 2B's scalars (its attention scale is 1/64: its head_dim)
        s.embd_scale = 12.0f;
        s.residual_scale = 0.22f;
        s.attn_scale = 0.015625f;
        s.logit_scale = 8.0f;
      }
      if (s.arch == "gpt-oss") {  // gpt-oss-20b's window and YaRN unless given
        s.n_swa = 128;
        s.rope_scaling = "yarn";
        s.rope_factor = 32;
        if (!s.rope_orig_ctx) s.rope_orig_ctx = 4096;
      }
    }
    if (o->sliding_window >= 0) s.n_swa = o->sliding_window;
    if (o->swa_pattern) s.swa_pattern = o->swa_pattern;
    if (o->rope_theta > 0) s.rope_theta = o->rope_theta;
    if (!o->rope_scaling.empty()) s.rope_scaling = o->rope_scaling == "none" ? "" : o->rope_scaling;
    if (o->rope_factor > 0) s.rope_factor = o->rope_factor;
    if (o->embd_scale > 0) s.embd_scale = o->embd_scale;
    if (o->residual_scale > 0) s.residual_scale = o->residual_scale;
    if (o->attn_scale > 0) s.attn_scale = o->attn_scale;
    if (o->logit_scale > 0) s.logit_scale = o->logit_scale;
    const bool cohere = s.arch == "command-r" || s.arch == "cohere2";
    const bool minicpm = s.arch == "minicpm";  // (granite's scalars but the attention scale)
    if ((s.embd_scale > 0 || s.residual_scale > 0 || (s.attn_scale > 0 && !minicpm) ||
         (s.logit_scale > 0 && !cohere)) &&
        s.arch != "granite" && s.arch != "granitemoe" && s.arch != "granitehybrid" && !minicpm) {
      log_error("dummy: --embedding-scale, --residual-scale, --attention-scale and --logit-scale are granite's "
                "(--logit-scale also command-r's and cohere2's; all but --attention-scale minicpm's)");
      return 2;
    }
    if (minicpm && s.attn_scale > 0) {
      log_error("dummy: minicpm has no attention scale (llama.cpp reads none for it)");
      return 2;
    }
    if (o->head_dim) s.head_dim = o->head_dim;
    else if (o->shape.empty() && s.n_head) s.head_dim = s.n_embd / s.n_head;
    if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_ff <= 0 || s.head_dim <= 0) {
      log_error("dummy: give --shape or all of --n-embd --n-layer --n-head --n-ff");
      return 2;
    }
    auto t = dtype_from_name(o->dtype);
    if (!t) {
      log_error("unknown dtype '{}'", o->dtype);
      return 2;
    }
    d.dtype = *t;
    d.pure = o->pure;
    d.std = o->std;
    d.seed = o->seed;
    d.vocab_path = o->vocab;
    d.threads = o->threads;
    d.pooling = o->pooling;
    if (o->fim && !d.vocab_path.empty()) {
      log_error("--fim adds tokens to the synthetic vocabulary; with --vocab the vocabulary is the file's");
      return 2;
    }
    d.fim = o->fim;
    auto st = write_dummy_model(d, o->out);
    if (!st.ok()) {
      log_error("dummy: {}", st.error());
      return 1;
    }
    log_info("wrote {} ({} {})", o->out, s.name, o->dtype);
    return 0;
  };
});
}  // namespace
