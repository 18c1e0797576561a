// tokenmill eval perplexity --model M --text FILE: llama-perplexity-style PPL of a text.
// --kl-divergence-base FILE also saves the scored logits as llama-perplexity's flag of that name does,
// so llama.cpp (llama-perplexity --kl-divergence) or `eval compare --reference-logits` can use them.
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "eval_common.h"

namespace {
using namespace tmill;

struct PplCli {
  std::string model, text, kv = "auto", kld_base;
  cli::EvalStreamCli s;
};

int run_ppl(const PplCli& o) {
  auto model = cli::load_eval_model(o.model.empty() ? cli::default_model_path() : o.model);
  if (!model.ok()) return log_error("{}", model.error()), 1;
  std::vector<int32_t> original;
  auto chunks = cli::eval_chunks(**model, o.text, o.s, &original);
  if (!chunks.ok()) return log_error("{}", chunks.error()), 1;
  std::optional<eval::KldBaseWriter> base;
  if (!o.kld_base.empty()) {
    auto w = eval::KldBaseWriter::create(o.kld_base, o.s.ctx, (*model)->config().n_vocab, original);
    if (!w.ok()) return log_error("{}", w.error()), 1;
    base.emplace(std::move(*w));
  }
  ThreadPool pool(cli::threads_or_default(o.s.threads));
  auto stream = cli::make_stream(*model, o.kv, o.s, &pool);
  if (!stream.ok()) return log_error("{}", stream.error()), 1;
  auto r = eval::perplexity(**stream, *chunks, o.s.json ? eval::ChunkProgress{} : cli::chunk_progress("perplexity"),
                            base ? &*base : nullptr);
  if (!r.ok()) return log_error("{}", r.error()), 1;
  if (base) {
    if (auto st = base->close(); !st.ok()) return log_error("{}", st.error()), 1;
    log_info("{}: KL-divergence base written ({} chunk(s) of {})", o.kld_base, r->chunks, r->n_ctx);
  }
  const char* kv = eval::kv_dtype_name((*stream)->options().kv_dtype);
  const double tps = r->seconds > 0 ? static_cast<double>(r->chunks * (r->n_ctx - 1)) / r->seconds : 0;
  if (o.s.json) {
    nlohmann::ordered_json j{{"model", (*model)->path()},  {"ppl", r->ppl.ppl},
                             {"ppl_stderr", r->ppl.ppl_stderr}, {"mean_nll", r->ppl.mean_nll},
                             {"nll_stderr", r->ppl.nll_stderr}, {"tokens", r->ppl.tokens},
                             {"chunks", r->chunks},         {"ctx", r->n_ctx},
                             {"kv_cache_dtype", kv},        {"seconds", r->seconds},
                             {"tokens_per_s", tps}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("PPL = %.4f +/- %.4f  (mean NLL %.6f +/- %.6f; %lld scored tokens, %lld chunk(s) of %lld, KV %s, %.2f s, "
                "%.1f tokens/s)\n",
                r->ppl.ppl, r->ppl.ppl_stderr, r->ppl.mean_nll, r->ppl.nll_stderr, static_cast<long long>(r->ppl.tokens),
                static_cast<long long>(r->chunks), static_cast<long long>(r->n_ctx), kv, r->seconds, tps);
  }
  return 0;
}

TM_COMMAND("eval perplexity", "perplexity of a text file (llama-perplexity method: chunks, second half scored)",
           [](CLI::App& app) -> cli::CommandRun {
             auto o = std::make_shared<PplCli>();
             app.add_option("--model", o->model, "GGUF model (default: the bundled stories260K)");
             app.add_option("--text", o->text, "UTF-8 text file")->required();
             app.add_option("--kv-cache-dtype", o->kv, std::string(kKvCacheDtypeNames))->capture_default_str();
             cli::add_eval_stream_options(app, o->s);
             app.add_option("--kl-divergence-base", o->kld_base,
                            "also save the scored logits in llama-perplexity's --kl-divergence-base format (the "
                            "reference for `eval compare --reference-logits` or llama-perplexity --kl-divergence)");
             app.add_flag("--json", o->s.json, "print one JSON object");
             return [o] { return run_ppl(*o); };
           });

}  // namespace
