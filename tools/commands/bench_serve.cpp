// `tokenmill bench serve`: load-test any OpenAI-compatible server (tokenmill, vLLM, llama-server).
// The work is done by the load generator module (src/loadgen/loadgen.h); this file only maps flags to options.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/log.h"
#include "loadgen/loadgen.h"

namespace {

struct Flags {
  tmill::loadgen::BenchOptions o;
  std::string endpoint = "chat", dataset = "random", rate = "inf", burstiness = "1";
  std::vector<std::string> goodput;
  std::string structured_schema_path;
  bool no_progress = false, quiet = false;
};

bool parse_double_or_inf(const std::string& s, double* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || std::isnan(v)) return false;
  *out = v;
  return true;
}

TM_COMMAND("bench serve", "load-test an OpenAI-compatible server (TTFT/TPOT/throughput, scenarios, HTML report)",
           [](CLI::App& app) -> tmill::cli::CommandRun {
  auto f = std::make_shared<Flags>();
  auto& o = f->o;
  app.add_option("--base-url", o.base_url, "server root URL, e.g. http://127.0.0.1:8000")->required();
  app.add_option("--api-key", o.api_key, "bearer token (default: $OPENAI_API_KEY)");
  app.add_option("--model", o.model, "model name (default: first id of GET /v1/models)");
  app.add_option("--endpoint", f->endpoint, "chat or completions")->check(CLI::IsMember({"chat", "completions"}));
  app.add_option("--num-prompts", o.num_prompts, "requests to send (default 100)");
  app.add_option("--max-concurrency", o.max_concurrency, "most requests in flight (default: unlimited)");
  app.add_option("--request-rate", f->rate, "requests/s, Poisson/gamma arrivals; inf = all at once (default)");
  app.add_option("--burstiness", f->burstiness, "gamma shape of inter-arrival times (1 = Poisson; <1 burstier)");
  app.add_option("--seed", o.seed, "random seed for prompts and arrivals");
  app.add_flag("--ignore-eos", o.ignore_eos, "send \"ignore_eos\": true (vLLM/tokenmill extension)");
  app.add_option("--num-warmups", o.num_warmups, "warm-up requests before measuring");
  app.add_option("--structured-fraction", o.structured_fraction,
                 "fraction of the requests sent with response_format json_schema, spread evenly (default 0)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--structured-schema", f->structured_schema_path,
                 "JSON Schema file for --structured-fraction (default: a built-in object schema)");
  app.add_option("--timeout", o.timeout_s, "per-request timeout in seconds (default 600)");
  app.add_option("--ready-check-timeout-sec", o.ready_check_timeout_s,
                 "first wait up to this long for the server to answer /health with 200 (it answers 503 while "
                 "loading); 0 = do not wait (default)");
  app.add_option("--max-tokens", o.max_tokens, "max_tokens for every request (default: the dataset's output length)");
  app.add_option("--max-workers", o.max_workers, "HTTP worker threads = most concurrent streams (default 512)");
  app.add_option("--dataset", f->dataset, "random, shared-prefix or jsonl")
      ->check(CLI::IsMember({"random", "shared-prefix", "jsonl"}));
  app.add_option("--dataset-path", o.dataset_path, "JSONL file: {\"prompt\": ...} or {\"messages\": [...]} per line");
  app.add_option("--input-len", o.input_len, "random/shared-prefix: prompt length in words ~ tokens (default 1024)");
  app.add_option("--output-len", o.output_len, "output tokens per request (default 128)");
  app.add_option("--range-ratio", o.range_ratio, "lengths uniform in [len*(1-r), len*(1+r)] (default 0)");
  app.add_option("--prefix-len", o.prefix_len, "shared-prefix: words in each shared prefix (default 1024)");
  app.add_option("--num-prefixes", o.num_prefixes, "shared-prefix: number of distinct prefixes (default 4)");
  app.add_option("--goodput", f->goodput, "SLOs for goodput, e.g. --goodput ttft:500 tpot:50 e2el:10000 (ms)");
  app.add_flag("--no-progress", f->no_progress, "no progress display on stderr");
  app.add_flag("--quiet", f->quiet, "no summary table on stdout");
  app.add_option("--metrics-interval", o.metrics_interval_s, "seconds between /metrics scrapes; 0 = off (default 1)");
  app.add_option("--json", o.json_path, "write every figure to this JSON file");
  app.add_option("--report", o.report_path, "write a self-contained HTML report with charts");
  app.add_option("--scenario", o.scenario,
                 "single-user, concurrency, long-prompt, long-output, oom-boundary, recovery, or all");
  app.add_option("--concurrency-levels", o.concurrency_levels, "concurrency sweep levels (default 1,2,4,8,16,32,64)")
      ->delimiter(',');
  app.add_option("--slo-ttft-ms", o.slo_ttft_ms, "concurrency scenario: p99 TTFT SLO for the knee (default 2000)");
  app.add_option("--context-len", o.context_len, "long-prompt/oom: context length (default: server's max_model_len, else 2048)");
  app.add_option("--time-budget", o.time_budget_s, "seconds for the whole invocation (scenarios share it); 0 = none");
  app.add_flag("--short", o.short_mode, "shrink every scenario (tests, smoke runs)");
  app.add_option("--restart-command", o.restart_command,
                 "recovery scenario: a shell command that kills and restarts the server, run in the middle of the "
                 "load; measures the time until the server serves again and the requests lost");
  return [f, &app]() -> int {
    auto& o = f->o;
    for (const char* name : {"num-prompts", "max-concurrency", "request-rate", "input-len", "output-len",
                             "concurrency-levels", "context-len", "prefix-len"})
      if (app.count(std::string("--") + name) > 0) o.explicit_opts.insert(name);
    o.endpoint = f->endpoint == "completions" ? tmill::loadgen::Endpoint::Completions : tmill::loadgen::Endpoint::Chat;
    o.dataset = f->dataset == "jsonl" ? tmill::loadgen::DatasetKind::Jsonl
                : f->dataset == "shared-prefix" ? tmill::loadgen::DatasetKind::SharedPrefix
                                                : tmill::loadgen::DatasetKind::Random;
    if (!parse_double_or_inf(f->rate, &o.request_rate) || !parse_double_or_inf(f->burstiness, &o.burstiness)) {
      std::fprintf(stderr, "error: --request-rate and --burstiness take a number or inf\n");
      return 2;
    }
    auto slo = tmill::loadgen::parse_slo(f->goodput);
    if (!slo) {
      std::fprintf(stderr, "error: %s\n", slo.error().c_str());
      return 2;
    }
    o.goodput = *slo;
    o.progress = !f->no_progress;
    if (!f->structured_schema_path.empty()) {
      std::ifstream in(f->structured_schema_path, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      if (!in || !nlohmann::json::accept(ss.str())) {
        std::fprintf(stderr, "error: --structured-schema %s: not a readable JSON file\n", f->structured_schema_path.c_str());
        return 2;
      }
      o.structured_schema = ss.str();
    }
    auto report = tmill::loadgen::run_bench(o, tmill::cli::version_string());
    if (!report) {
      std::fprintf(stderr, "error: %s\n", report.error().c_str());
      return 1;
    }
    if (!f->quiet) std::fputs(tmill::loadgen::render_text_summary(*report).c_str(), stdout);
    std::fflush(stdout);
    if (auto st = tmill::loadgen::write_reports(*report, o); !st) {
      std::fprintf(stderr, "error: %s\n", st.error().c_str());
      return 1;
    }
    if (!o.json_path.empty()) tmill::log_info("bench: wrote {}", o.json_path);
    if (!o.report_path.empty()) tmill::log_info("bench: wrote {}", o.report_path);
    return 0;
  };
});

}  // namespace
