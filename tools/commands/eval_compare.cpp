// tokenmill eval compare --reference M_REF --model M_Q --text FILE: KL divergence, top-1 agreement and
// perplexity of a (quantized) model against a reference on the same tokens. The same file with two
// --kv-cache-dtype values measures a KV cache type instead.
// tokenmill eval compare --reference-logits FILE --model M: the reference is llama.cpp's own logits, the
// file `llama-perplexity --kl-divergence-base FILE` writes (its tokens are scored; no --text).
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
  std::string reference, reference_logits, model, text, ref_kv = "auto", kv = "auto";
  cli::EvalStreamCli s;
  const CLI::Option* ctx_opt = nullptr;  // to tell an explicit --ctx from the default
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

void print_result(const CompareCli& o, const eval::CompareResult& r, const std::string& ref_name, const char* rkv,
                  const char* mkv) {
  if (o.s.json) {
    nlohmann::ordered_json j;
    j["kld"] = {{"mean", r.kld.mean}, {"stderr", r.kld.stderr_mean}, {"median", r.kld.median},
                {"p90", r.kld.p90},   {"p99", r.kld.p99},            {"max", r.kld.max}};
    j["top1_agreement"] = r.top1_agreement;
    j["ppl_reference"] = r.ppl_reference.ppl;
    j["ppl_model"] = r.ppl_model.ppl;
    j["tokens"] = r.tokens;
    j["ppl_reference_stderr"] = r.ppl_reference.ppl_stderr;
    j["ppl_model_stderr"] = r.ppl_model.ppl_stderr;
    j["delta_ppl"] = r.delta_ppl;
    j["delta_ppl_stderr"] = r.delta_ppl_stderr;
    j["ln_ppl_ratio"] = r.ln_ppl_ratio;
    j["ln_ppl_ratio_stderr"] = r.ln_ppl_ratio_stderr;
    j["top1_same"] = r.top1_same;
    j["chunks"] = r.chunks;
    j["ctx"] = r.n_ctx;
    if (o.reference_logits.empty()) {
      j["reference"] = ref_name;
    } else {
      j["reference_logits"] = ref_name;
    }
    j["model"] = o.model;
    if (rkv) j["reference_kv_cache_dtype"] = rkv;
    j["kv_cache_dtype"] = mkv;
    j["seconds"] = r.seconds;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  if (rkv) {
    std::printf("reference  %s (KV %s)\n", ref_name.c_str(), rkv);
  } else {
    std::printf("reference  %s (llama.cpp's logits)\n", ref_name.c_str());
  }
  std::printf("model      %s (KV %s)\n", o.model.c_str(), mkv);
  std::printf("scored     %lld tokens (%lld chunk(s) of %lld), %.2f s\n", static_cast<long long>(r.tokens),
              static_cast<long long>(r.chunks), static_cast<long long>(r.n_ctx), r.seconds);
  std::printf("KLD        mean %.6f +/- %.6f  median %.6f  p90 %.6f  p99 %.6f  max %.6f\n", r.kld.mean,
              r.kld.stderr_mean, r.kld.median, r.kld.p90, r.kld.p99, r.kld.max);
  std::printf("top-1      %.4f%% agreement (%lld/%lld)\n", 100.0 * r.top1_agreement, static_cast<long long>(r.top1_same),
              static_cast<long long>(r.tokens));
  std::printf("PPL ref    %.4f +/- %.4f\nPPL model  %.4f +/- %.4f\n", r.ppl_reference.ppl, r.ppl_reference.ppl_stderr,
              r.ppl_model.ppl, r.ppl_model.ppl_stderr);
  std::printf("dPPL       %+.4f +/- %.4f  (ln(PPL_model/PPL_ref) %+.6f +/- %.6f)\n", r.delta_ppl, r.delta_ppl_stderr,
              r.ln_ppl_ratio, r.ln_ppl_ratio_stderr);
}

// --reference-logits: llama.cpp's KL-divergence base file as the reference.
int run_compare_logits(CompareCli o) {
  if (!o.text.empty()) return log_error("--text is not used with --reference-logits: the file carries its tokens"), 2;
  auto base = eval::KldBaseFile::open(o.reference_logits);
  if (!base.ok()) return log_error("{}", base.error()), 1;
  if (o.ctx_opt && o.ctx_opt->count() > 0 && o.s.ctx != base->n_ctx())
    return log_error("--ctx {} differs from the context of {} ({}): the reference logits were computed over chunks of {} "
                     "tokens; pass --ctx {} or leave it out",
                     o.s.ctx, o.reference_logits, base->n_ctx(), base->n_ctx(), base->n_ctx()),
           2;
  o.s.ctx = base->n_ctx();
  if (o.s.batch < 1) return log_error("--batch must be at least 1"), 2;
  if (o.s.chunks < 0) return log_error("--chunks must be 0 (all) or more"), 2;
  auto m = cli::load_eval_model(o.model);
  if (!m.ok()) return log_error("{}", m.error()), 1;
  if ((*m)->config().n_vocab != base->n_vocab())
    return log_error("{} has a vocabulary of {} tokens, the model {}: KL divergence needs the same vocabulary",
                     o.reference_logits, base->n_vocab(), (*m)->config().n_vocab),
           2;
  auto tok = Tokenizer::from_gguf((*m)->file());
  const int32_t bos = tok.ok() && (*tok)->add_bos() ? (*tok)->bos_id() : -1;
  log_info("{}: {} chunk(s) of {} tokens, vocabulary {}; scoring {}", o.reference_logits, base->n_chunk(), base->n_ctx(),
           base->n_vocab(), o.s.chunks > 0 ? fmt::format("{} chunk(s)", std::min<int64_t>(o.s.chunks, base->n_chunk())) : "all");
  ThreadPool pool(cli::threads_or_default(o.s.threads));
  auto ms = cli::make_stream(*m, o.kv, o.s, &pool);
  if (!ms.ok()) return log_error("model: {}", ms.error()), 1;
  auto r = eval::compare_reference_logits(**ms, *base, bos, o.s.chunks,
                                          o.s.json ? eval::ChunkProgress{} : cli::chunk_progress("compare"));
  if (!r.ok()) return log_error("{}", r.error()), 1;
  print_result(o, *r, o.reference_logits, nullptr, eval::kv_dtype_name((*ms)->options().kv_dtype));
  return 0;
}

int run_compare(const CompareCli& o) {
  if (o.reference.empty() == o.reference_logits.empty())
    return log_error("give exactly one of --reference (a GGUF model) and --reference-logits (llama-perplexity's "
                     "--kl-divergence-base file)"),
           2;
  if (!o.reference_logits.empty()) return run_compare_logits(o);
  if (o.text.empty()) return log_error("--text is required with --reference"), 2;
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
  print_result(o, *r, o.reference, eval::kv_dtype_name((*rs)->options().kv_dtype),
               eval::kv_dtype_name((*ms)->options().kv_dtype));
  return 0;
}

TM_COMMAND("eval compare", "KL divergence, top-1 agreement and perplexity of a model against a reference",
           [](CLI::App& app) -> cli::CommandRun {
             auto o = std::make_shared<CompareCli>();
             app.add_option("--reference", o->reference, "reference GGUF (e.g. the F16 model)");
             app.add_option("--reference-logits", o->reference_logits,
                            "llama.cpp's logits as the reference: the file llama-perplexity --kl-divergence-base FILE "
                            "writes (its tokens are scored; --ctx must match it)");
             app.add_option("--model", o->model, "GGUF to evaluate (e.g. its quantization)")->required();
             app.add_option("--text", o->text, "UTF-8 text file (with --reference)");
             app.add_option("--reference-kv-cache-dtype", o->ref_kv, "the reference's KV cache: " + std::string(kKvCacheDtypeNames))
                 ->capture_default_str();
             app.add_option("--kv-cache-dtype", o->kv, "the model's KV cache: " + std::string(kKvCacheDtypeNames))
                 ->capture_default_str();
             cli::add_eval_stream_options(app, o->s);
             o->ctx_opt = app.get_option("--ctx");
             app.add_flag("--json", o->s.json,
                          "print {\"kld\":{\"mean\",\"p99\",\"max\",..},\"top1_agreement\",\"ppl_reference\",\"ppl_model\","
                          "\"tokens\",..}");
             return [o] { return run_compare(*o); };
           });

}  // namespace
