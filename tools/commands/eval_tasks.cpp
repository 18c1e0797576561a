// tokenmill eval tasks --model M [--model M2 ...] --tasks FILE.jsonl: the user's own test cases on the
// engine (all cases batched, greedy), per model accuracy, answers, latency and throughput; side-by-side
// reports in markdown / HTML / JSON.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "core/log.h"
#include "core/mmap.h"
#include "engine_options.h"
#include "eval/task_report.h"
#include "eval/task_runner.h"

namespace {
using namespace tmill;

struct TasksCli {
  std::vector<std::string> models;
  std::string tasks, markdown, report;
  bool json = false;
  int32_t max_tokens = 128;
  double min_accuracy = -1;
  cli::EngineCli engine;  // every field but the model
};

Status write_text(const std::string& path, const std::string& s) { return write_file(path, s.data(), s.size()); }

int run_tasks_cmd(TasksCli& o) {
  auto cases = eval::parse_task_file(o.tasks);
  if (!cases.ok()) return log_error("{}", cases.error()), 2;
  if (o.max_tokens < 1) return log_error("--max-tokens must be at least 1"), 2;
  if (o.models.empty()) o.models.push_back(cli::default_model_path());
  eval::TaskReport rep;
  rep.tasks_file = o.tasks;
  rep.cases = *cases;
  eval::TaskRunOptions ro;
  ro.default_max_tokens = o.max_tokens;
  for (const std::string& path : o.models) {
    cli::EngineCli ec = o.engine;
    ec.model = path;
    double load_s = 0;
    auto engine = cli::create_engine(ec, &load_s);
    if (!engine.ok()) return log_error("{}", engine.error()), 1;
    auto run = eval::run_tasks(**engine, *cases, ro);
    if (!run.ok()) return log_error("{}: {}", path, run.error()), 1;
    run->load_s = load_s;
    run->model = path;  // as given: the engine maps an in-memory GGUF for a folder or split GGUF
    log_info("{}: {}/{} passed ({:.1f}%), latency p50 {:.3f} s p95 {:.3f} s, {:.1f} tokens/s", run->model_name,
             run->passed, run->cases.size(), 100.0 * run->accuracy, run->latency_s.median, run->latency_s.p95,
             run->tokens_per_s);
    rep.runs.push_back(std::move(run).value());
  }
  if (!o.markdown.empty())
    if (auto st = write_text(o.markdown, eval::report_markdown(rep)); !st.ok()) return log_error("{}", st.error()), 1;
  if (!o.report.empty())
    if (auto st = write_text(o.report, eval::report_html(rep)); !st.ok()) return log_error("{}", st.error()), 1;
  if (o.json) {
    const std::string s = eval::report_json(rep).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%s\n", s.c_str());
  } else {
    const std::string md = eval::report_markdown(rep);
    std::fwrite(md.data(), 1, md.size(), stdout);
  }
  if (o.min_accuracy >= 0)
    for (const auto& r : rep.runs)
      if (100.0 * r.accuracy + 1e-9 < o.min_accuracy) {
        log_error("{}: accuracy {:.1f}% is below --min-accuracy {}", r.model_name, 100.0 * r.accuracy, o.min_accuracy);
        return 3;
      }
  return 0;
}

TM_COMMAND("eval tasks", "run your own task file (exact/contains/regex/json_fields/choice) on one or more models",
           [](CLI::App& app) -> cli::CommandRun {
             auto o = std::make_shared<TasksCli>();
             app.add_option("--model", o->models, "GGUF model; repeat to compare models (default: stories260K)");
             app.add_option("--tasks", o->tasks, "task file, one JSON case per line (see docs/eval.md)")->required();
             app.add_flag("--json", o->json, "print the full report as JSON");
             app.add_option("--markdown", o->markdown, "write a markdown report to this file");
             app.add_option("--report", o->report, "write a self-contained HTML report to this file");
             app.add_option("--max-tokens", o->max_tokens, "tokens per answer for cases without max_tokens")
                 ->capture_default_str();
             app.add_option("--min-accuracy", o->min_accuracy, "exit with status 3 if a model scores below this percent");
             app.add_option("--threads", o->engine.threads, "compute threads (default: all cores)");
             app.add_option("--kv-cache-memory", o->engine.kv_cache_memory, "KV cache size, e.g. 2GiB (default: automatic)");
             app.add_option("--kv-cache-dtype", o->engine.kv_cache_dtype, "auto, f32, f16, bf16, int8, q4_0, fp8, fp8_e4m3 or fp8_e5m2")
                 ->capture_default_str();
             app.add_option("--max-num-seqs", o->engine.max_num_seqs, "sequences per step")->capture_default_str();
             app.add_option("--max-num-batched-tokens", o->engine.max_num_batched_tokens, "token budget per step")
                 ->capture_default_str();
             app.add_option("--max-model-len", o->engine.max_model_len, "context length (default: the model's)");
             return [o] { return run_tasks_cmd(*o); };
           });

}  // namespace
