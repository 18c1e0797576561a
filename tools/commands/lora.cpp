// tokenmill lora dummy: write a random LoRA adapter for a base model (llama.cpp's LoRA GGUF);
// tokenmill lora merge: write a base model with adapters merged into its weights (llama-export-lora).
#include <memory>

#include "cli_common.h"
#include "convert/lora.h"
#include "core/log.h"
#include "core/strings.h"
#include "engine_options.h"

namespace {

struct LoraDummyCli {
  std::string base, out, dtype = "F32", targets;
  int64_t rank = 8;
  float alpha = 16.0f, spread = 0.1f;
  uint64_t seed = 42;
};

TM_COMMAND("lora dummy", "write a random-valued LoRA adapter (llama.cpp's LoRA GGUF) for a base model",
           [](CLI::App& app) -> tmill::cli::CommandRun {
             auto o = std::make_shared<LoraDummyCli>();
             app.add_option("-m,--model", o->base, "base model GGUF (architecture and tensor shapes)")->required();
             app.add_option("-o,--output", o->out, "adapter GGUF to write")->required();
             app.add_option("--rank", o->rank, "LoRA rank")->capture_default_str();
             app.add_option("--alpha", o->alpha, "adapter.lora.alpha (scale = alpha / rank); 0: none")->capture_default_str();
             app.add_option("--targets", o->targets,
                            "comma-separated: layer matrices by name (attn_q, attn_k, attn_v, attn_qkv, attn_output, "
                            "ffn_gate, ffn_up, ffn_down), whole names (output.weight, token_embd.weight), 'layers' "
                            "(every layer matrix, the default) or 'all' (layers + output + token_embd)");
             app.add_option("--dtype", o->dtype, "F32, F16, BF16 or Q8_0")->capture_default_str();
             app.add_option("--spread", o->spread, "values uniform in +-spread")->capture_default_str();
             app.add_option("--seed", o->seed, "random seed (same seed, same bytes)")->capture_default_str();
             return [o] {
               using namespace tmill;
               DummyLoraOptions d;
               d.base_path = o->base;
               d.rank = o->rank;
               d.alpha = o->alpha;
               d.spread = o->spread;
               d.seed = o->seed;
               for (std::string t : split(o->targets, ',')) {
                 t.erase(0, t.find_first_not_of(' '));
                 t.erase(t.find_last_not_of(' ') + 1);
                 if (!t.empty()) d.targets.push_back(t);
               }
               auto t = dtype_from_name(o->dtype);
               if (!t) {
                 log_error("unknown dtype '{}'", o->dtype);
                 return 2;
               }
               d.dtype = *t;
               if (auto st = write_dummy_lora(d, o->out); !st.ok()) {
                 log_error("lora dummy: {}", st.error());
                 return 1;
               }
               log_info("wrote {} (rank {}, {})", o->out, o->rank, o->dtype);
               return 0;
             };
           });

struct LoraMergeCli {
  tmill::cli::EngineCli flags;  // only its --lora / --lora-scaled lists
  std::string base, out;
};

TM_COMMAND("lora merge", "write a model with LoRA adapters merged into its weights (like llama-export-lora)",
           [](CLI::App& app) -> tmill::cli::CommandRun {
             auto o = std::make_shared<LoraMergeCli>();
             app.add_option("-m,--model", o->base, "base model GGUF")->required();
             app.add_option("-o,--output", o->out, "merged model GGUF to write")->required();
             app.add_option("--lora", o->flags.lora, "adapter FILE[:SCALE] (repeatable; scale default 1)");
             app.add_option("--lora-scaled", o->flags.lora_scaled, "adapter FILE with a SCALE (repeatable)")
                 ->type_name("FILE SCALE");
             return [o] {
               using namespace tmill;
               auto loras = cli::lora_flags(o->flags);
               if (!loras.ok()) {
                 log_error("{}", loras.error());
                 return 2;
               }
               std::vector<LoraMergeInput> in;
               for (const auto& l : *loras) in.push_back({l.path, l.scale});
               if (auto st = merge_lora(o->base, in, o->out); !st.ok()) {
                 log_error("lora merge: {}", st.error());
                 return 1;
               }
               log_info("wrote {} ({} adapter{} merged; adapted tensors in F32)", o->out, in.size(), in.size() == 1 ? "" : "s");
               return 0;
             };
           });

}  // namespace
