// tokenmill eval imatrix --model M --text FILE -o imatrix.gguf: importance matrix for
// `tokenmill quantize --imatrix` (llama.cpp's GGUF imatrix format).
#include <chrono>
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "convert/imatrix_file.h"
#include "core/progress.h"
#include "eval/imatrix_collect.h"
#include "eval_common.h"

namespace {
using namespace tmill;

struct ImatrixCli {
  std::string model, text, output;
  bool process_output = false;
  cli::EvalStreamCli s;
};

int run_imatrix(const ImatrixCli& o) {
  auto model = cli::load_eval_model(o.model.empty() ? cli::default_model_path() : o.model);
  if (!model.ok()) return log_error("{}", model.error()), 1;
  auto chunks = cli::eval_chunks(**model, o.text, o.s);
  if (!chunks.ok()) return log_error("{}", chunks.error()), 1;
  ThreadPool pool(cli::threads_or_default(o.s.threads));
  // Activations are what they are for the model's own compute type: f32 KV for F32 models, else f16.
  auto stream = cli::make_stream(*model, "auto", o.s, &pool);
  if (!stream.ok()) return log_error("{}", stream.error()), 1;
  eval::ImatrixOptions io;
  io.include_output = o.process_output;
  io.dataset = o.text;
  const auto t0 = std::chrono::steady_clock::now();
  ProgressBar bar("imatrix", 0, "chunks");
  auto m = eval::collect_imatrix(**stream, *chunks, io, [&bar](int64_t done, int64_t total) {
    bar.set_total(static_cast<uint64_t>(total));
    bar.update(static_cast<uint64_t>(done));
  });
  bar.finish();
  if (!m.ok()) return log_error("{}", m.error()), 1;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (auto st = save_imatrix(*m, o.output); !st.ok()) return log_error("{}: {}", o.output, st.error()), 1;
  std::printf("imatrix: %zu weight matrices, %lld chunk(s) of %lld tokens, %.2f s -> %s\n", m->entries.size(),
              static_cast<long long>(m->chunk_count), static_cast<long long>(m->chunk_size), secs, o.output.c_str());
  return 0;
}

TM_COMMAND("eval imatrix", "importance matrix (sum of squared input activations per weight column) for quantize --imatrix",
           [](CLI::App& app) -> cli::CommandRun {
             auto o = std::make_shared<ImatrixCli>();
             app.add_option("--model", o->model, "GGUF model, ideally the unquantized one (default: stories260K)");
             app.add_option("--text", o->text, "calibration text (UTF-8)")->required();
             app.add_option("-o,--output", o->output, "output imatrix GGUF")->required();
             app.add_flag("--process-output", o->process_output, "also collect the output projection");
             cli::add_eval_stream_options(app, o->s);
             return [o] { return run_imatrix(*o); };
           });

}  // namespace
