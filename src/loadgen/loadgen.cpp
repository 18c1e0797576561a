#include "loadgen/loadgen.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "core/log.h"
#include "loadgen/scenarios.h"

namespace tmill::loadgen {

const char* dataset_name(DatasetKind k) {
  switch (k) {
    case DatasetKind::Random: return "random";
    case DatasetKind::SharedPrefix: return "shared-prefix";
    case DatasetKind::Jsonl: return "jsonl";
  }
  return "?";
}

const std::vector<std::string>& scenario_names() {
  static const std::vector<std::string> names = {"single-user", "concurrency", "long-prompt",
                                                 "long-output", "oom-boundary", "recovery"};
  return names;
}

namespace {

std::string iso_utc_now() {
  time_t t = time(nullptr);
  struct tm tmv;
  gmtime_r(&t, &tmv);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tmv);
  return buf;
}

Status validate(const BenchOptions& o) {
  if (o.base_url.empty()) return Error{"--base-url is required"};
  if (o.num_prompts < 1) return Error{"--num-prompts must be at least 1"};
  if (o.max_concurrency < 0) return Error{"--max-concurrency must be >= 0"};
  if (!(o.request_rate > 0)) return Error{"--request-rate must be > 0 (or inf)"};
  if (!(o.burstiness > 0)) return Error{"--burstiness must be > 0"};
  if (!(o.timeout_s > 0)) return Error{"--timeout must be > 0"};
  if (!(o.ready_check_timeout_s >= 0)) return Error{"--ready-check-timeout-sec must be >= 0"};
  if (o.input_len < 1 || o.output_len < 1) return Error{"--input-len and --output-len must be >= 1"};
  if (o.range_ratio < 0 || o.range_ratio >= 1) return Error{"--range-ratio must be in [0, 1)"};
  if (o.max_workers < 1) return Error{"--max-workers must be >= 1"};
  if (o.dataset == DatasetKind::Jsonl && o.dataset_path.empty()) return Error{"--dataset jsonl needs --dataset-path"};
  for (int c : o.concurrency_levels)
    if (c < 1) return Error{"--concurrency-levels must be positive"};
  if (!o.scenario.empty() && o.scenario != "all") {
    const auto& n = scenario_names();
    if (std::find(n.begin(), n.end(), o.scenario) == n.end())
      return Error{"unknown scenario '" + o.scenario + "' (single-user, concurrency, long-prompt, long-output, "
                   "oom-boundary, recovery, all)"};
  }
  if (!o.restart_command.empty() && o.scenario != "recovery" && o.scenario != "all")
    return Error{"--restart-command is for --scenario recovery (or all)"};
  return ok_status();
}

ScenarioResult run_named(BenchContext& ctx, ScenarioState& st, const std::string& name) {
  if (name == "single-user") return run_single_user(ctx);
  if (name == "concurrency") return run_concurrency(ctx, st);
  if (name == "long-prompt") return run_long_prompt(ctx);
  if (name == "long-output") return run_long_output(ctx);
  if (name == "oom-boundary") return run_oom_boundary(ctx, st);
  return run_recovery(ctx, st);
}

// Polls OpenAiClient::alive (GET /health, then GET /v1/models for servers without /health) about
// once a second until one answers 200: tokenmill and vLLM answer 503 while the model loads.
Status wait_until_ready(const BenchContext& ctx, double timeout_s) {
  OpenAiClient probe(ctx.url, ctx.api_key, 5.0);
  const auto t0 = std::chrono::steady_clock::now();
  bool told = false;
  for (;;) {
    const Status st = probe.alive(5.0);
    if (st.ok()) {
      if (told) log_info("bench: {} is ready", ctx.url.str());
      return {};
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited >= timeout_s)
      return Error{fmt::format("{} is not ready after {:.0f} s of --ready-check-timeout-sec ({})", ctx.url.str(),
                               timeout_s, st.error())};
    if (!told) {
      log_info("bench: waiting up to {:.0f} s for {} to become ready ({})", timeout_s, ctx.url.str(), st.error());
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(1.0, timeout_s - waited)));
  }
}

}  // namespace

Result<BenchReport> run_bench(const BenchOptions& opts, const std::string& tool_version) {
  TM_TRY(validate(opts));
  BenchContext ctx;
  ctx.opts = opts;
  TM_ASSIGN_OR_RETURN(ctx.url, parse_base_url(opts.base_url));
  ctx.api_key = opts.api_key;
  if (ctx.api_key.empty())
    if (const char* k = std::getenv("OPENAI_API_KEY"); k && *k) ctx.api_key = k;
  if (opts.dataset == DatasetKind::Jsonl) {
    TM_ASSIGN_OR_RETURN(ctx.file_prompts, load_jsonl_dataset(opts.dataset_path, 0, opts.output_len));
  }

  if (opts.ready_check_timeout_s > 0) TM_TRY(wait_until_ready(ctx, opts.ready_check_timeout_s));
  {
    OpenAiClient probe(ctx.url, ctx.api_key, std::min(opts.timeout_s, 30.0));
    auto models = probe.list_models();
    if (!models && opts.model.empty())
      return Error{"cannot reach " + ctx.url.str() + " (" + models.error() + "); is the server up? (or pass --model)"};
    if (models && models->empty() && opts.model.empty()) return Error{"GET /v1/models lists no model; pass --model"};
    ctx.model = opts.model.empty() ? (*models)[0].id : opts.model;
    if (models)
      for (const auto& m : *models)
        if (m.id == ctx.model) ctx.max_model_len = m.max_model_len;
  }

  BenchReport rep;
  rep.tool_version = tool_version;
  rep.base_url = ctx.url.str();
  rep.model = ctx.model;
  rep.endpoint = endpoint_name(opts.endpoint);
  rep.scenario = opts.scenario.empty() ? "custom" : opts.scenario;
  rep.max_model_len = ctx.max_model_len;
  rep.started_at = iso_utc_now();
  ctx.t0 = std::chrono::steady_clock::now();
  if (opts.time_budget_s > 0)
    ctx.deadline = ctx.t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(opts.time_budget_s));
  MetricsScraper scraper(ctx.url, ctx.api_key, opts.metrics_interval_s, ctx.t0);
  if (opts.metrics_interval_s > 0) {
    scraper.start();
    if (!scraper.available()) log_info("bench: no Prometheus /metrics with vLLM serving metrics; not scraping");
  }
  ctx.scraper = &scraper;
  log_info("bench: {} model '{}' via {} endpoint{}", rep.base_url, ctx.model, rep.endpoint,
           ctx.max_model_len ? fmt::format(" (max_model_len {})", ctx.max_model_len) : "");

  ScenarioState st;
  if (opts.scenario.empty()) {
    rep.scenarios.push_back(run_custom(ctx));
  } else {
    std::vector<std::string> todo = opts.scenario == "all" ? scenario_names() : std::vector<std::string>{opts.scenario};
    for (size_t i = 0; i < todo.size(); ++i) {
      BenchContext sub = ctx;
      if (ctx.deadline) {  // share what is left evenly among the scenarios still to run
        const double share = ctx.time_left_s() / static_cast<double>(todo.size() - i);
        sub.deadline = std::min(*ctx.deadline, std::chrono::steady_clock::now() +
                                                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(share)));
      }
      log_info("bench: scenario {} ({}/{})", todo[i], i + 1, todo.size());
      ScenarioResult sr = run_named(sub, st, todo[i]);
      log_info("bench: {} [{}]: {}", sr.name, sr.status, sr.verdict);
      rep.scenarios.push_back(std::move(sr));
    }
  }
  scraper.stop();
  rep.metrics_available = scraper.available();
  rep.metrics_series = scraper.samples();
  rep.duration_s = ctx.now_s();
  rep.finished_at = iso_utc_now();

  auto& p = rep.parameters;
  p["num_prompts"] = opts.num_prompts;
  p["max_concurrency"] = opts.max_concurrency;
  p["request_rate"] = std::isinf(opts.request_rate) ? nlohmann::json("inf") : nlohmann::json(opts.request_rate);
  p["burstiness"] = std::isinf(opts.burstiness) ? nlohmann::json("inf") : nlohmann::json(opts.burstiness);
  p["seed"] = opts.seed;
  p["ignore_eos"] = opts.ignore_eos;
  p["num_warmups"] = opts.num_warmups;
  p["timeout_s"] = opts.timeout_s;
  p["ready_check_timeout_s"] = opts.ready_check_timeout_s;
  p["max_tokens"] = opts.max_tokens;
  p["dataset"] = dataset_name(opts.dataset);
  p["input_len"] = opts.input_len;
  p["output_len"] = opts.output_len;
  p["range_ratio"] = opts.range_ratio;
  if (opts.dataset == DatasetKind::SharedPrefix) {
    p["prefix_len"] = opts.prefix_len;
    p["num_prefixes"] = opts.num_prefixes;
  }
  if (opts.dataset == DatasetKind::Jsonl) p["dataset_path"] = opts.dataset_path;
  p["metrics_interval_s"] = opts.metrics_interval_s;
  p["concurrency_levels"] = opts.concurrency_levels;
  p["slo_ttft_ms"] = opts.slo_ttft_ms;
  p["context_len"] = opts.context_len;
  p["time_budget_s"] = opts.time_budget_s;
  p["short"] = opts.short_mode;
  nlohmann::json slo = nlohmann::json::object();
  if (opts.goodput.ttft_ms) slo["ttft_ms"] = *opts.goodput.ttft_ms;
  if (opts.goodput.tpot_ms) slo["tpot_ms"] = *opts.goodput.tpot_ms;
  if (opts.goodput.e2el_ms) slo["e2el_ms"] = *opts.goodput.e2el_ms;
  p["goodput_slo"] = slo;
  return rep;
}

}  // namespace tmill::loadgen
