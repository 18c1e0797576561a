// tokenmill inspect FILE: architecture, hyper-parameters, tensor types and sizes, tokenizer, template.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "cli_common.h"
#include "core/log.h"
#include "core/strings.h"
#include "formats/gguf.h"
#include "model/config.h"

namespace {
struct InspectCli {
  std::string path;
  bool tensors = false, metadata = false;
};

TM_COMMAND("inspect", "print a model file's architecture, hyper-parameters and tensors", [](CLI::App& app) -> tmill::cli::CommandRun {
  auto o = std::make_shared<InspectCli>();
  app.add_option("file", o->path, "GGUF file")->required();
  app.add_flag("--tensors", o->tensors, "list every tensor");
  app.add_flag("--metadata", o->metadata, "list every metadata key");
  return [o] {
    using namespace tmill;
    auto f = GgufFile::open(o->path);
    if (!f.ok()) {
      log_error("{}", f.error());
      return 1;
    }
    const GgufFile& g = *f;
    auto str = [&](const char* k) { return g.get_string(k).value_or("(none)"); };
    std::printf("file:          %s\n", o->path.c_str());
    std::printf("format:        GGUF v%u, alignment %llu, %zu metadata keys, %zu tensors\n", g.version(),
                (unsigned long long)g.alignment(), g.metadata().size(), g.tensors().size());
    std::printf("name:          %s\n", str("general.name").c_str());
    std::printf("architecture:  %s\n", str("general.architecture").c_str());
    auto cfg = read_model_config(g);
    if (cfg.ok()) {
      const ModelConfig& c = *cfg;
      if (c.arch.attention_free)  // (mamba, mamba2: the attention fields are placeholders)
        std::printf("hyper-params:  vocab %lld, hidden %lld, layers %lld, attention-free (no heads, no FFN)\n",
                    (long long)c.n_vocab, (long long)c.n_embd, (long long)c.n_layer);
      else
        std::printf("hyper-params:  vocab %lld, hidden %lld, layers %lld, heads %lld (kv %lld, head_dim %lld), ffn %lld\n",
                    (long long)c.n_vocab, (long long)c.n_embd, (long long)c.n_layer, (long long)c.n_head,
                    (long long)c.n_head_kv, (long long)c.head_dim, (long long)c.n_ff);
      if (c.n_ssm_layers() > 0) {  // what each recurrent layer is, and the state a sequence carries
        const std::string what =
            c.arch.gated_delta_net
                ? fmt::format("gated delta nets ({} value heads over {} key heads of {})", c.ssm_n_head, c.ssm_n_group,
                              c.ssm_d_state)
            : c.arch.mamba1 ? fmt::format("Mamba-1 mixers (inner {}, state {}, dt rank {}, conv {})", c.ssm_d_inner,
                                          c.ssm_d_state, c.ssm_dt_rank, c.ssm_d_conv)
                            : fmt::format("Mamba-2 mixers (inner {}: {} heads of {}, state {}, {} group(s), conv {})",
                                          c.ssm_d_inner, c.ssm_n_head, c.ssm_head_dim(), c.ssm_d_state, c.ssm_n_group,
                                          c.ssm_d_conv);
        std::printf("recurrent:     %lld of %lld layers %s%s; %s of state per sequence\n", (long long)c.n_ssm_layers(),
                    (long long)c.n_layer, what.c_str(), c.arch.parallel_ssm ? ", each beside attention" : "",
                    format_bytes(static_cast<uint64_t>(c.n_ssm_layers() * c.ssm_state_floats()) * sizeof(float)).c_str());
      }
      if (c.is_moe())
        std::printf("experts:       %lld, %lld per token (%s), expert ffn %lld%s\n", (long long)c.n_expert,
                    (long long)c.n_expert_used, c.arch.moe_norm_topk ? "weights renormalized" : "softmax weights",
                    (long long)c.n_ff_exp,
                    c.n_ff_shexp ? fmt::format(", shared expert ffn {}", c.n_ff_shexp).c_str() : "");
      if (c.is_moe() && (c.moe_sigmoid || c.moe_groups > 1 || c.moe_weights_scale != 1.0f || c.n_layer_dense_lead > 0))
        std::printf("routing:       %s gating%s, weights x%g, first %lld layer(s) dense\n",
                    c.moe_sigmoid ? "sigmoid" : "softmax",
                    c.moe_groups > 1 ? fmt::format(", the best {} of {} expert groups", c.moe_groups_used, c.moe_groups).c_str()
                                     : "",
                    c.moe_weights_scale, (long long)c.n_layer_dense_lead);
      if (c.is_mla())
        std::printf("attention:     multi-head latent (MLA): cached latent %lld + RoPE %lld per token, q rank %lld, "
                    "heads of %lld + %lld, values %lld\n",
                    (long long)c.mla_kv_rank, (long long)c.n_rot, (long long)c.mla_q_rank, (long long)c.mla_nope,
                    (long long)c.n_rot, (long long)c.mla_v);
      if (c.arch.attention_free) {
        std::printf("context:       %lld trained; no attention, no positions; rms eps %g\n", (long long)c.n_ctx_train,
                    c.rms_eps);
      } else {
        std::printf(
            "context:       %lld trained; rope theta %g, %s layout, n_rot %lld%s; rms eps %g\n", (long long)c.n_ctx_train,
            c.rope_theta, c.arch.rope_layout == RopeLayout::NeoX ? "neox" : "adjacent-pair", (long long)c.n_rot,
            c.rope_scaling == RopeScaling::Linear ? fmt::format(", linear scaling x{}", c.rope_scale_factor).c_str()
            : c.rope_scaling == RopeScaling::Yarn
                ? fmt::format(", YaRN x{} (original context {})", c.rope_scale_factor, c.n_ctx_orig).c_str()
            : c.rope_scaling == RopeScaling::Llama3 && c.arch.layer_geometry ? ", proportional on the full layers (rope_freqs)"
            : c.rope_scaling == RopeScaling::Llama3 ? ", llama3 scaling"
            : c.rope_scaling == RopeScaling::LongRope
                ? fmt::format(", LongRoPE (original context {}, attn factor {:.4g})", c.n_ctx_orig, c.rope_attn_factor).c_str()
                : "",
            c.rms_eps);
      }
      if (!c.ropes.empty() && !c.ropes[0].still.empty()) {
        int64_t still = 0;
        for (uint8_t s : c.ropes[0].still) still += s;
        std::printf("rope:          M-RoPE on text: NeoX with %lld of %lld rotation pairs still (the fourth section's)\n",
                    (long long)still, (long long)c.ropes[0].still.size());
      }
      bool roped = false;
      for (int64_t l = 0; l < c.n_layer; ++l) roped = roped || (c.has_attention(l) && c.has_rope(l));
      if (!c.alibi.empty())
        std::printf("positions:     ALiBi, slopes %g .. %g over %lld heads (no RoPE)\n", c.alibi.front(), c.alibi.back(),
                    (long long)c.n_head);
      else if (c.n_pos_embd > 0 && g.find_tensor("position_embd.weight"))
        std::printf("positions:     learned, %lld (position_embd; the context cannot exceed them; no RoPE)\n",
                    (long long)c.n_pos_embd);
      else if (!roped && !c.arch.attention_free && c.n_kv_layers() > 0 && c.n_ssm_layers() == 0)
        std::printf("positions:     none (no RoPE, ALiBi or learned positions)\n");
      if (c.clamp_kqv > 0) std::printf("attention:     q, k, v clamped to +-%g\n", c.clamp_kqv);
      if (c.arch.bidirectional)  // gemma-embedding
        std::printf("attention:     bidirectional (an embedding model: it does not generate)%s\n",
                    c.n_swa > 0 ? fmt::format("; a sliding window sees {} positions either side", c.n_swa / 2).c_str() : "");
      if (c.n_swa > 0) {
        int64_t sliding = 0;
        for (const auto& la : c.layer_attn) sliding += la.window > 0;
        std::printf("attention:     sliding window %lld on %lld of %lld layers%s\n", (long long)c.n_swa, (long long)sliding,
                    (long long)c.n_layer,
                    c.ropes.size() > 1 ? fmt::format(" (their rope theta {})", c.ropes[1].theta).c_str() : "");
      }
      if (!c.layer_shape.empty()) {  // gemma4, deci: each kind of layer's geometry, in order of first appearance
        std::vector<std::pair<std::string, int64_t>> kinds;
        for (int64_t l = 0; l < c.n_layer; ++l) {
          const std::string attn =
              !c.has_mixer(l) ? "no attention"
              : c.is_linear_attn(l) ? "linear attention"  // (deci)
                                    : fmt::format("{} heads of {} (kv {}), {} RoPE dims", c.n_head_of(l), c.head_dim_of(l),
                                                  c.n_head_kv_of(l), c.n_rot_of(l));
          const std::string k = attn + (c.has_ffn(l) ? fmt::format(", ffn {}", c.n_ff_of(l)) : ", no FFN");
          auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& e) { return e.first == k; });
          if (it == kinds.end()) kinds.emplace_back(k, 1);
          else ++it->second;
        }
        for (size_t i = 0; i < kinds.size(); ++i)
          std::printf("%s%lld layers with %s\n", i == 0 ? "layers:        " : "               ",
                      (long long)kinds[i].second, kinds[i].first.c_str());
      }
      if (c.kv_shared_from > 0)
        std::printf("K/V:           layers %lld-%lld read earlier layers' K/V (%lld layers hold a cache)\n",
                    (long long)c.kv_shared_from, (long long)c.n_layer - 1, (long long)c.n_kv_layers());
      if (c.n_embd_per_layer > 0)
        std::printf("embeddings:    + per-layer inputs, %lld per layer\n", (long long)c.n_embd_per_layer);
      if (c.attn_softcap > 0 || c.final_softcap > 0)
        std::printf("soft-capping:  attention %g, logits %g\n", c.attn_softcap, c.final_softcap);
      std::printf("output:        %s\n", c.tied_output ? "tied to token embedding" : "separate output.weight");
    } else if (g.find("general.architecture")) {
      std::printf("model config:  not loadable: %s\n", cfg.error().c_str());
    } else {
      std::printf("model config:  none (vocabulary-only file)\n");
    }
    const GgufValue* toks = g.find("tokenizer.ggml.tokens");
    std::printf("tokenizer:     %s (pre: %s), %zu tokens\n", str("tokenizer.ggml.model").c_str(),
                str("tokenizer.ggml.pre").c_str(), toks && toks->as_string_array() ? toks->as_string_array()->size() : 0);
    auto tmpl = g.get_string("tokenizer.chat_template");
    std::printf("chat template: %s\n", tmpl ? fmt::format("present ({} bytes)", tmpl->size()).c_str() : "absent");
    std::map<std::string, std::pair<int, uint64_t>> by_type;
    int64_t params = 0;
    uint64_t bytes = 0;
    for (auto& t : g.tensors()) {
      auto& e = by_type[dtype_name(t.type)];
      e.first++;
      e.second += t.nbytes;
      params += t.n_elements;
      bytes += t.nbytes;
    }
    std::printf("parameters:    %lld (%.3f B), %s of tensor data\n", (long long)params, params / 1e9,
                format_bytes(bytes).c_str());
    for (auto& [name, e] : by_type)
      std::printf("  %-8s %5d tensors %12s\n", name.c_str(), e.first, format_bytes(e.second).c_str());
    if (o->metadata)
      for (auto& [k, v] : g.metadata()) std::printf("  %-48s %s\n", k.c_str(), v.to_display().c_str());
    if (o->tensors)
      for (auto& t : g.tensors()) {
        std::string shape;
        for (size_t i = 0; i < t.ne.size(); ++i) shape += (i ? " x " : "") + std::to_string(t.ne[i]);
        std::printf("  %-40s %-6s [%s] %s\n", t.name.c_str(), dtype_name(t.type), shape.c_str(),
                    format_bytes(t.nbytes).c_str());
      }
    return 0;
  };
});
}  // namespace
