// tokenmill convert: llama2.c checkpoints (and, via the HF branch, Hugging Face folders) to GGUF.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "convert/hf_convert.h"
#include "convert/llama2c.h"
#include "core/log.h"
#include "core/progress.h"

namespace {
struct ConvertOpts {
  std::string llama2c;
  std::string tokenizer;
  std::string out;
  std::string name;
  std::string hf;               // Hugging Face model folder (--hf DIR or positional)
  std::string outtype = "auto";  // HF: f32 | f16 | bf16 | auto
};

TM_COMMAND("convert", "convert a llama2.c checkpoint (or HF folder) to GGUF", [](CLI::App& app) -> tmill::cli::CommandRun {
  auto o = std::make_shared<ConvertOpts>();
  app.add_option("--llama2c", o->llama2c, "llama2.c checkpoint (.bin)");
  app.add_option("--tokenizer", o->tokenizer, "llama2.c tokenizer.bin (with --llama2c)");
  app.add_option("--name", o->name, "general.name to record (default: llama2.c model / the HF folder name)");
  app.add_option("--hf", o->hf, "Hugging Face model folder (config.json, *.safetensors, tokenizer.json)");
  app.add_option("hf_dir", o->hf, "Hugging Face model folder (same as --hf)");
  app.add_option("--outtype", o->outtype, "HF: type of the 2-D weights: f32, f16, bf16 or auto (= source dtype)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "auto"}))
      ->capture_default_str();
  app.add_option("-o,--output", o->out, "output GGUF file")->required();
  return [o] {
    if (!o->llama2c.empty()) {
      if (o->tokenizer.empty()) {
        tmill::log_error("--llama2c needs --tokenizer TOKENIZER.bin");
        return 2;
      }
      tmill::Llama2cConvertOptions opts;
      opts.name = o->name.empty() ? "llama2.c model" : o->name;
      auto st = tmill::convert_llama2c_to_gguf(o->llama2c, o->tokenizer, o->out, opts);
      if (!st.ok()) {
        tmill::log_error("convert failed: {}", st.error());
        return 1;
      }
      tmill::log_info("wrote {}", o->out);
      return 0;
    }
    if (!o->hf.empty()) {
      tmill::HfConvertOptions opts;
      opts.outtype = o->outtype;
      opts.name = o->name;
      std::unique_ptr<tmill::ProgressBar> bar;
      auto st = tmill::convert_hf_model_with(o->hf, opts, [&](tmill::GgufWriter& w) {
        bar = std::make_unique<tmill::ProgressBar>("convert", w.tensor_count(), "tensors");
        w.set_progress([&bar](size_t done, size_t, const std::string& name) { bar->update(done, name); });
        return w.write(o->out);
      });
      if (bar) bar->finish();
      if (!st.ok()) {
        tmill::log_error("convert failed: {}", st.error());
        return 1;
      }
      tmill::log_info("wrote {}", o->out);
      return 0;
    }
    tmill::log_error("nothing to convert: pass --hf DIR, or --llama2c MODEL.bin --tokenizer TOK.bin");
    return 2;
  };
});
}  // namespace
