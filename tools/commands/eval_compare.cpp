// tokenmill eval compare --reference M_REF --model M_Q --text FILE: KL divergence, top-1 agreement and
// perplexity of a (quantized) model against a reference on the same tokens. The same file with two
// --kv-cache-dtype values measures a KV cache type instead.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "eval_common.h"
#include "tokenizer/tokenizer.h"

namespace {
using namespace tmill;

struct CompareCli {
  std::string reference, model, text, ref_kv = "auto", kv = "auto";
  cli::EvalStreamCli s;
};

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

// Same token strings (when both files carry a tokenizer) and the same logits width.
Status check_vocab(const Model& a, const Model& b) {
  if (a.config().n_vocab != b.config().n_vocab)
    return Error{fmt::format("the models have different vocabularies ({} vs {} logits): KL divergence needs the same one",
                             a.config().n_vocab, b.config().n_vocab)};
  auto ta = Tokenizer::from_gguf(a.file());
  auto tb = Tokenizer::from_gguf(b.file());
  if (ta.ok() && tb.ok()) {
    const auto& x = (*ta)->data().tokens;
    const auto& y = (*tb)->data().tokens;
    bool same = x.size() == y.size();
    for (size_t i = 0; same && i < x.size(); ++i) same = x[i].text == y[i].text;
    if (!same)
      return Error{"the models have the same vocabulary size but different tokens: KL divergence needs the same vocabulary"};
  }
  return Status{};
}

int run_compare(const CompareCli& o) {
  auto ref = cli::load_eval_model(o.reference);
  if (!ref.ok()) return log_error("{}", ref.error()), 1;
  std::shared_ptr<Model> model;
  if (same_file(o.reference, o.model)) {
    model = *ref;  // one copy of the weights serves both streams
  } else {
    auto m = cli::load_eval_model(o.model);
    if (!m.ok()) return log_error("{}", m.error()), 1;
    model = *m;
  }
  if (auto st = check_vocab(**ref, *model); !st.ok()) return log_error("{}", st.error()), 2;
  auto chunks = cli::eval_chunks(**ref, o.text, o.s);
  if (!chunks.ok()) return log_error("{}", chunks.error()), 1;
  ThreadPool pool(cli::threads_or_default(o.s.threads));
  auto rs = cli::make_stream(*ref, o.ref_kv, o.s, &pool);
  if (!rs.ok()) return log_error("reference: {}", rs.error()), 1;
  Result<std::unique_ptr<eval::LogitStream>> ms = Error{""};
  if (model == *ref) {
    // Same weights, e.g. two KV types: share the prepared (repacked) weights too.
    auto dt = eval::parse_kv_dtype(o.kv, *model);
    if (!dt.ok()) return log_error("model: {}", dt.error()), 1;
    eval::LogitStreamOptions so = (*rs)->options();
    so.kv_dtype = *dt;
    ms = eval::LogitStream::create((*rs)->forward(), so);
  } else {
    ms = cli::make_stream(model, o.kv, o.s, &pool);
  }
  if (!ms.ok()) return log_error("model: {}", ms.error()), 1;
  auto r = eval::compare(**rs, **ms, *chunks, o.s.json ? eval::ChunkProgress{} : cli::chunk_progress("compare"));
  if (!r.ok()) return log_error("{}", r.error()), 1;
  const char* rkv = eval::kv_dtype_name((*rs)->options().kv_dtype);
  const char* mkv = eval::kv_dtype_name((*ms)->options().kv_dtype);
  if (o.s.json) {
    nlohmann::ordered_json j;
    j["kld"] = {{"mean", r->kld.mean}, {"stderr", r->kld.stderr_mean}, {"median", r->kld.median},
                {"p90", r->kld.p90},   {"p99", r->kld.p99},            {"max", r->kld.max}};
    j["top1_agreement"] = r->top1_agreement;
    j["ppl_reference"] = r->ppl_reference.ppl;
    j["ppl_model"] = r->ppl_model.ppl;
    j["tokens"] = r->tokens;
    j["ppl_reference_stderr"] = r->ppl_reference.ppl_stderr;
    j["ppl_model_stderr"] = r->ppl_model.ppl_stderr;
    j["delta_ppl"] = r->delta_ppl;
    j["delta_ppl_stderr"] = r->delta_ppl_stderr;
    j["ln_ppl_ratio"] = r->ln_ppl_ratio;
    j["ln_ppl_ratio_stderr"] = r->ln_ppl_ratio_stderr;
    j["top1_same"] = r->top1_same;
    j["chunks"] = r->chunks;
    j["ctx"] = r->n_ctx;
    j["reference"] = o.reference;
    j["model"] = o.model;
    j["reference_kv_cache_dtype"] = rkv;
    j["kv_cache_dtype"] = mkv;
    j["seconds"] = r->seconds;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("reference  %s (KV %s)\nmodel      %s (KV %s)\n", o.reference.c_str(), rkv, o.model.c_str(), mkv);
  std::printf("scored     %lld tokens (%lld chunk(s) of %lld), %.2f s\n", static_cast<long long>(r->tokens),
              static_cast<long long>(r->chunks), static_cast<long long>(r->n_ctx), r->seconds);
  std::printf("KLD        mean %.6f +/- %.6f  median %.6f  p90 %.6f  p99 %.6f  max %.6f\n", r->kld.mean,
              r->kld.stderr_mean, r->kld.median, r->kld.p90, r->kld.p99, r->kld.max);
  std::printf("top-1      %.4f%% agreement (%lld/%lld)\n", 100.0 * r->top1_agreement, static_cast<long long>(r->top1_same),
              static_cast<long long>(r->tokens));
  std::printf("PPL ref    %.4f +/- %.4f\nPPL model  %.4f +/- %.4f\n", r->ppl_reference.ppl, r->ppl_reference.ppl_stderr,
              r->ppl_model.ppl, r->ppl_model.ppl_stderr);
  std::printf("dPPL       %+.4f +/- %.4f  (ln(PPL_model/PPL_ref) %+.6f +/- %.6f)\n", r->delta_ppl, r->delta_ppl_stderr,
              r->ln_ppl_ratio, r->ln_ppl_ratio_stderr);
  return 0;
}

TM_COMMAND("eval compare", "KL divergence, top-1 agreement and perplexity of a model against a reference",
           [](CLI::App& app) -> cli::CommandRun {
             auto o = std::make_shared<CompareCli>();
             app.add_option("--reference", o->reference, "reference GGUF (e.g. the F16 model)")->required();
             app.add_option("--model", o->model, "GGUF to evaluate (e.g. its quantization)")->required();
             app.add_option("--text", o->text, "UTF-8 text file")->required();
             app.add_option("--reference-kv-cache-dtype", o->ref_kv, "the reference's KV cache: auto, f32, f16, bf16, int8")
                 ->capture_default_str();
             app.add_option("--kv-cache-dtype", o->kv, "the model's KV cache: auto, f32, f16, bf16, int8")
                 ->capture_default_str();
             cli::add_eval_stream_options(app, o->s);
             app.add_flag("--json", o->s.json,
                          "print {\"kld\":{\"mean\",\"p99\",\"max\",..},\"top1_agreement\",\"ppl_reference\",\"ppl_model\","
                          "\"tokens\",..}");
             return [o] { return run_compare(*o); };
           });

}  // namespace
