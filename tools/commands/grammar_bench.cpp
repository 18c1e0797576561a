// tokenmill grammar bench --tokenizer T --cases DIR [--json OUT] [--timeout-ms N] [--threads N]
//   MaskBench's method over every *.json file of DIR (eval/maskbench.h): prints a summary table
//   (totals and by category, mask and compile-time percentiles) and writes the JSON report to OUT
//   as it goes (replaced atomically, so a cut-off run leaves a readable file).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "cli_common.h"
#include "core/log.h"
#include "eval/maskbench.h"
#include "tokenizer/tokenizer.h"

namespace {

struct GrammarBenchCli {
  std::string tokenizer, cases, json_out;
  int64_t timeout_ms = 10000;
  int threads = 0;
  int every = 1;
  bool check_only = false;
  bool schema_order = false;
};

bool write_json(const std::string& path, const nlohmann::ordered_json& j) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return false;
    f << j.dump(1) << "\n";
    if (!f) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

int run(const GrammarBenchCli& o) {
  using namespace tmill;
  auto tok = Tokenizer::load(o.tokenizer);
  if (!tok.ok()) {
    log_error("{}", tok.error());
    return 1;
  }
  auto files = eval::maskbench_files(o.cases);
  if (!files.ok()) {
    log_error("{}", files.error());
    return 1;
  }
  std::vector<std::string> picked;
  for (size_t i = 0; i < files->size(); i += size_t(std::max(1, o.every))) picked.push_back((*files)[i]);
  if (picked.empty()) {
    log_error("no *.json files in {}", o.cases);
    return 1;
  }
  eval::MaskBenchOptions opt;
  opt.timeout_ms = o.timeout_ms;
  opt.masks = !o.check_only;
  opt.any_order = !o.schema_order;
  opt.threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::fprintf(stderr, "grammar bench: %zu schemas, %d threads, timeout %lld ms\n", picked.size(), opt.threads,
               (long long)opt.timeout_ms);
  bool write_failed = false;
  auto progress = [&](const eval::MaskBenchReport& rep, size_t done) {
    std::fprintf(stderr, "\r%zu/%zu", done, picked.size());
    if (!o.json_out.empty() && !write_json(o.json_out, rep.to_json())) write_failed = true;
  };
  eval::MaskBenchReport rep = eval::run_maskbench(picked, **tok, opt, progress);
  std::fprintf(stderr, "\n");
  std::string table = rep.table();
  std::fwrite(table.data(), 1, table.size(), stdout);
  if (!o.json_out.empty() && (!write_json(o.json_out, rep.to_json()) || write_failed)) {
    log_error("cannot write {}", o.json_out);
    return 1;
  }
  return 0;
}

TM_COMMAND("grammar bench", "MaskBench: JSON Schema compile and token-mask correctness and speed",
           [](CLI::App& app) -> tmill::cli::CommandRun {
             auto o = std::make_shared<GrammarBenchCli>();
             app.add_option("--tokenizer", o->tokenizer, "GGUF file or Hugging Face tokenizer folder")->required();
             app.add_option("--cases", o->cases, "folder of MaskBench *.json files")->required();
             app.add_option("--json", o->json_out, "write the JSON report here (as the run goes)");
             app.add_option("--timeout-ms", o->timeout_ms, "time limit per schema (counted as timeout)")
                 ->capture_default_str();
             app.add_option("--threads", o->threads, "schemas run in parallel, one thread each (default: all cores)");
             app.add_option("--every", o->every, "take every N-th file only (a quick sample)")->capture_default_str();
             app.add_flag("--schema-order", o->schema_order,
                          "instances must list properties in the schema's order, as generation does (default: "
                          "optional ones anywhere, as the instances are written)");
             app.add_flag("--check-only", o->check_only,
                          "judge instances by advancing the matcher only, without computing masks (fast)");
             return [o] { return run(*o); };
           });

}  // namespace
