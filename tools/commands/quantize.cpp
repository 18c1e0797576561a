// tokenmill quantize IN OUT --type TYPE: GGUF to GGUF with llama.cpp's quantization mixtures.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>

#include "cli_common.h"
#include "convert/model_quantizer.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/strings.h"
#include "quant/quant.h"

namespace {
using namespace tmill;

struct QuantizeCli {
  std::string input, output, type, imatrix, output_tensor_type, token_embedding_type;
  bool pure = false, leave_output = false, quiet = false;
  int threads = 0;
  int64_t ctx = 0;
  int64_t concurrency = 1;
};

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s;
  for (int64_t d : ne) s += (s.empty() ? "" : " x ") + std::to_string(d);
  return s;
}

std::string mib(uint64_t b) { return fmt::format("{:.2f}", static_cast<double>(b) / (1024.0 * 1024.0)); }

void print_report(const QuantizeReport& r, const QuantizeCli& o, const QuantRecipe& recipe) {
  std::printf("%-40s %-22s %-6s %-6s %12s %12s %10s  %s\n", "tensor", "shape", "from", "to", "MiB before", "MiB after",
              "rel RMS", "note");
  for (const QuantTensorReport& t : r.tensors) {
    const std::string err = t.converted ? fmt::format("{:.4f}%", 100.0 * t.rel_rms) : "copied";
    std::string note = t.note;
    if (t.used_imatrix) note = note.empty() ? "imatrix" : "imatrix; " + note;
    std::printf("%-40s %-22s %-6s %-6s %12s %12s %10s  %s\n", t.name.c_str(), shape_str(t.ne).c_str(),
                dtype_name(t.from), dtype_name(t.to), mib(t.bytes_in).c_str(), mib(t.bytes_out).c_str(), err.c_str(),
                note.c_str());
  }
  const double n = static_cast<double>(r.n_elements > 0 ? r.n_elements : 1);
  std::printf("\nrecipe %s (general.file_type %u)%s\n", recipe.name.c_str(), static_cast<unsigned>(recipe.ftype),
              o.pure ? ", pure" : "");
  std::printf("model size: %s MiB (%.2f bits/weight) -> %s MiB (%.2f bits/weight), file %s MiB\n",
              mib(r.bytes_in).c_str(), 8.0 * static_cast<double>(r.bytes_in) / n, mib(r.bytes_out).c_str(),
              8.0 * static_cast<double>(r.bytes_out) / n, mib(r.file_bytes_out).c_str());
  if (r.n_fallback > 0) std::printf("%d tensor(s) needed a fallback type (see notes)\n", r.n_fallback);
  std::printf("time: %.2f s\n", r.seconds);

  const int64_t ctx = o.ctx > 0 ? o.ctx : r.context_length;
  const uint64_t per_token = r.kv_bytes_per_token();
  if (ctx > 0 && per_token > 0) {
    const uint64_t kv = per_token * static_cast<uint64_t>(ctx) * static_cast<uint64_t>(o.concurrency);
    // recurrent layers: one state per sequence, whatever its length
    const uint64_t states = r.state_bytes_per_seq * static_cast<uint64_t>(o.concurrency);
    const std::string state_part =
        states == 0 ? std::string()
                    : " + recurrent state " + format_bytes(states) + " (" + std::to_string(r.state_layers) + " layers, " +
                          format_bytes(r.state_bytes_per_seq) + " per sequence)";
    std::printf("serving memory estimate: weights %s + KV cache %s (f16, %lld layers x %lld KV heads x %lld head dim, "
                "ctx %lld x %lld sequence(s), %s per token)%s = %s\n",
                format_bytes(r.bytes_out).c_str(), format_bytes(kv).c_str(), static_cast<long long>(r.kv_layers),
                static_cast<long long>(r.kv_heads), static_cast<long long>(r.head_dim),
                static_cast<long long>(ctx), static_cast<long long>(o.concurrency), format_bytes(per_token).c_str(),
                state_part.c_str(), format_bytes(r.bytes_out + kv + states).c_str());
  } else if (ctx > 0 && r.kv_layers == 0 && r.state_bytes_per_seq > 0) {  // mamba, mamba2: states only
    const uint64_t states = r.state_bytes_per_seq * static_cast<uint64_t>(o.concurrency);
    std::printf("serving memory estimate: weights %s + no KV cache (attention-free) + recurrent state %s (%lld layers, %s "
                "per sequence, %lld sequence(s), any length) = %s\n",
                format_bytes(r.bytes_out).c_str(), format_bytes(states).c_str(), static_cast<long long>(r.state_layers),
                format_bytes(r.state_bytes_per_seq).c_str(), static_cast<long long>(o.concurrency),
                format_bytes(r.bytes_out + states).c_str());
  } else {
    std::printf("serving memory estimate: weights %s (KV cache unknown: no context length or attention shape)\n",
                format_bytes(r.bytes_out).c_str());
  }
}

int run_quantize(const QuantizeCli& o) {
  auto recipe = recipe_from_name(o.type);
  if (!recipe) {
    log_error("{}", recipe.error());
    return 2;
  }
  QuantizeModelOptions q;
  q.input = o.input;
  q.output = o.output;
  q.recipe = *recipe;
  q.plan.pure = o.pure;
  q.plan.leave_output_tensor = o.leave_output;
  q.imatrix_path = o.imatrix;
  q.threads = o.threads;
  for (auto [flag, value, dst] : {std::tuple{"--output-tensor-type", &o.output_tensor_type, &q.plan.output_tensor_type},
                                  std::tuple{"--token-embedding-type", &o.token_embedding_type, &q.plan.token_embedding_type}}) {
    if (value->empty()) continue;
    auto t = dtype_from_name(*value);
    if (!t || !can_quantize(*t)) {
      log_error("{}: unknown or unsupported type '{}'", flag, *value);
      return 2;
    }
    *dst = *t;
  }
  if (o.input == o.output) {
    log_error("input and output are the same file");
    return 2;
  }
  auto bar = std::make_shared<ProgressBar>("quantize", 0, "tensors", o.quiet ? ProgressBar::Mode::Off : ProgressBar::Mode::Auto);
  q.progress = [bar](size_t done, size_t n, int64_t, int64_t, const std::string& name) {
    bar->set_total(n);
    bar->update(done, name);
  };
  auto report = quantize_model(q);
  bar->finish();
  if (!report) {
    log_error("quantize failed: {}", report.error());
    return 1;
  }
  print_report(*report, o, *recipe);
  return 0;
}

tmill::cli::CommandRun setup_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeCli>();
  app.add_option("input", o->input, "input GGUF (F32/F16/BF16, or quantized: dequantized first)")->required();
  app.add_option("output", o->output, "output GGUF")->required();
  std::string types;
  for (const QuantRecipe& r : all_recipes()) types += (types.empty() ? "" : ", ") + r.name;
  app.add_option("--type", o->type, "quantization type or mix: " + types + " (Q4_K = Q4_K_M, Q5_K = Q5_K_M, Q3_K = Q3_K_M)")
      ->required();
  app.add_flag("--pure", o->pure, "no mixture: every 2-D weight gets --type (default output handling off too)");
  app.add_option("--imatrix", o->imatrix,
                 "importance matrix (llama.cpp imatrix GGUF or legacy .dat; make one with `tokenmill eval imatrix`); "
                 "required, as by llama-quantize, by IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ3_XXS, IQ3_XS "
                 "and Q2_K_S");
  app.add_option("--threads", o->threads, "worker threads (default: all cores)");
  app.add_option("--output-tensor-type", o->output_tensor_type, "type for output.weight (e.g. Q8_0, F16)");
  app.add_option("--token-embedding-type", o->token_embedding_type, "type for token_embd.weight");
  app.add_flag("--leave-output-tensor", o->leave_output, "copy output.weight unchanged");
  app.add_option("--ctx", o->ctx, "context length for the memory estimate (default: the model's)");
  app.add_option("--concurrency", o->concurrency, "concurrent sequences for the memory estimate")->capture_default_str();
  app.add_flag("-q,--quiet", o->quiet, "no progress bar");
  return [o] { return run_quantize(*o); };
}

TM_COMMAND("quantize", "quantize a GGUF model (llama.cpp types and mixes: Q4_K_M, Q8_0, IQ4_XS, IQ2_XXS, ...)",
           setup_quantize);

}  // namespace
