// Scenario presets 1-4 (single-user, concurrency sweep, long prompt, long output) and the shared
// helpers; the stress scenarios (oom-boundary, recovery) are in scenarios_stress.cpp.
#include "loadgen/scenarios.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/log.h"
#include "loadgen/scenario_analysis.h"

namespace tmill::loadgen {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

int pick(const BenchOptions& o, const char* name, int user_value, int normal, int short_value) {
  if (o.is_set(name)) return user_value;
  return o.short_mode ? short_value : normal;
}

nlohmann::json num_or_inf(double v) { return std::isinf(v) ? nlohmann::json("inf") : nlohmann::json(v); }
}  // namespace

std::string fmt_ms(double ms) { return ms >= 100 ? fmt::format("{:.0f} ms", ms) : fmt::format("{:.1f} ms", ms); }

std::string failures_text(const RunMetrics& m) {
  std::string s;
  for (const auto& [k, v] : m.failures) s += fmt::format("{}{} x{}", s.empty() ? "" : ", ", k, v);
  return s.empty() ? "no failures" : s;
}

std::vector<Prompt> scenario_prompts(const BenchContext& ctx, size_t n, int input_len, int output_len,
                                     uint64_t seed, bool generic) {
  const BenchOptions& o = ctx.opts;
  if (generic && o.dataset == DatasetKind::Jsonl && !ctx.file_prompts.empty()) {
    std::vector<Prompt> out;
    for (size_t i = 0; i < n; ++i) out.push_back(ctx.file_prompts[i % ctx.file_prompts.size()]);
    return out;
  }
  if (generic && o.dataset == DatasetKind::SharedPrefix) {
    SharedPrefixConfig c;
    c.num_prompts = n;
    c.prefix_len = o.is_set("prefix-len") || !o.short_mode ? o.prefix_len : 64;
    c.num_prefixes = o.num_prefixes;
    c.suffix_len = input_len;
    c.output_len = output_len;
    c.range_ratio = o.range_ratio;
    c.seed = seed;
    return build_shared_prefix_dataset(c);
  }
  RandomDatasetConfig c;
  c.num_prompts = n;
  c.input_len = input_len;
  c.output_len = output_len;
  c.range_ratio = o.range_ratio;
  c.seed = seed;
  return build_random_dataset(c);
}

RunPlan make_plan(const BenchContext& ctx, std::string label, std::vector<Prompt> prompts,
                  int max_concurrency, double rate) {
  const BenchOptions& o = ctx.opts;
  RunPlan p;
  p.label = std::move(label);
  p.max_concurrency = max_concurrency;
  p.rate = rate;
  p.burstiness = o.burstiness;
  p.seed = o.seed;
  p.warmups = o.num_warmups;
  double in = 0, out = 0;
  for (const auto& pr : prompts) {
    in += pr.approx_tokens;
    out += o.max_tokens > 0 ? o.max_tokens : pr.max_tokens;
  }
  const double n = std::max<double>(1, static_cast<double>(prompts.size()));
  p.params = {{"label", p.label},
              {"num_prompts", prompts.size()},
              {"max_concurrency", max_concurrency > 0 ? nlohmann::json(max_concurrency) : nlohmann::json(nullptr)},
              {"request_rate", num_or_inf(rate)},
              {"burstiness", num_or_inf(o.burstiness)},
              {"mean_prompt_words", in / n},
              {"mean_max_tokens", out / n},
              {"ignore_eos", o.ignore_eos},
              {"dataset", dataset_name(o.dataset)}};
  p.prompts = std::move(prompts);
  return p;
}

const RunMetrics& run_into(const BenchContext& ctx, ScenarioResult& sr, const RunPlan& plan) {
  sr.runs.push_back(execute_run(ctx, plan));
  sr.metrics.push_back(compute_run_metrics(sr.runs.back(), ctx.opts.goodput));
  const RunMetrics& m = sr.metrics.back();
  if (m.failed) log_warn("{}: {} of {} requests failed ({}); first error: {}", plan.label, m.failed,
                         m.failed + m.completed, failures_text(m), m.first_error);
  if (int n = count_resent(sr.runs.back().requests); n > 0)
    log_info("{}: {} requests sent again on a new connection: the server had closed the kept-alive one",
             plan.label, n);
  return m;
}

void WordCalibration::refit() {
  if (points.size() < 2) return;
  double n = static_cast<double>(points.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : points) sx += x, sy += y, sxx += x * x, sxy += x * y;
  const double den = n * sxx - sx * sx;
  if (den <= 0) return;
  const double b = (n * sxy - sx * sy) / den;
  if (!(b > 0)) return;
  slope = b;
  overhead = (sy - b * sx) / n;
}

int WordCalibration::words_for(double tokens) const {
  return std::max(1, static_cast<int>(std::lround((tokens - overhead) / slope)));
}

WordCalibration calibrate_words(const BenchContext& ctx) {
  const BenchOptions& o = ctx.opts;
  WordCalibration cal;
  OpenAiClient probe(ctx.url, ctx.api_key, o.timeout_s);
  std::mt19937_64 rng(o.seed + 17);
  // A probe the server refuses (typically 400: longer than the context, with a small context or a
  // tokenizer that makes several tokens of a word) is retried with half the words.
  auto probe_fit = [&](int words, int min_words) -> std::pair<int, RequestResult> {
    for (;; words /= 2) {
      Prompt p;
      p.text = random_words(words, rng);
      auto r = probe.stream(o.endpoint, build_request_body(o.endpoint, ctx.model, p, 1, false));
      if (r.success || words / 2 < min_words) return {words, r};
    }
  };
  auto [w1, r1] = probe_fit(o.short_mode ? 16 : 64, 2);
  auto [w2, r2] = probe_fit(o.short_mode ? 64 : 256, 2 * w1);
  if (r1.success && r2.success && r1.usage_reported && r2.usage_reported && w2 > w1 &&
      r2.prompt_tokens > r1.prompt_tokens) {
    cal.points = {{double(w1), double(r1.prompt_tokens)}, {double(w2), double(r2.prompt_tokens)}};
    cal.refit();
    cal.calibrated = true;
  }
  return cal;
}

ScenarioResult run_custom(BenchContext& ctx) {
  const BenchOptions& o = ctx.opts;
  ScenarioResult sr{"custom", "Benchmark run with the given load options", "", "ok", {}, {}, {}};
  size_t n = o.dataset == DatasetKind::Jsonl && !o.is_set("num-prompts") ? ctx.file_prompts.size()
                                                                          : static_cast<size_t>(o.num_prompts);
  auto plan = make_plan(ctx, "custom", scenario_prompts(ctx, n, o.input_len, o.output_len, o.seed, true),
                        o.max_concurrency, o.request_rate);
  const auto& m = run_into(ctx, sr, plan);
  sr.verdict = fmt::format("{}/{} requests succeeded; {:.1f} output tok/s; TTFT p50 {}, TPOT p50 {}",
                           m.completed, m.completed + m.failed, m.output_throughput, fmt_ms(m.ttft_ms.p50),
                           fmt_ms(m.tpot_ms.p50));
  if (m.goodput_enabled) sr.verdict += fmt::format("; goodput {:.2f} req/s", m.request_goodput);
  sr.status = m.completed == 0 ? "fail" : (m.failed ? "warn" : "ok");
  return sr;
}

ScenarioResult run_single_user(BenchContext& ctx) {
  const BenchOptions& o = ctx.opts;
  ScenarioResult sr{"single-user", "One client, sequential requests: baseline TTFT and TPOT", "", "ok", {}, {}, {}};
  int n = pick(o, "num-prompts", o.num_prompts, 16, 4);
  int in = pick(o, "input-len", o.input_len, 256, 32);
  int out = pick(o, "output-len", o.output_len, 128, 16);
  auto plan = make_plan(ctx, "single-user", scenario_prompts(ctx, static_cast<size_t>(n), in, out, o.seed, true), 1, kInf);
  const auto& m = run_into(ctx, sr, plan);
  const double tps = m.tpot_ms.p50 > 0 ? 1000.0 / m.tpot_ms.p50 : 0;
  sr.verdict = fmt::format("baseline TTFT p50 {} (p99 {}), TPOT p50 {} (~{:.1f} tok/s per stream), E2E p50 {}; {}",
                           fmt_ms(m.ttft_ms.p50), fmt_ms(m.ttft_ms.p99), fmt_ms(m.tpot_ms.p50), tps,
                           fmt_ms(m.e2el_ms.p50), failures_text(m));
  sr.status = m.completed == 0 ? "fail" : (m.failed ? "warn" : "ok");
  sr.details = {{"ttft_p50_ms", m.ttft_ms.p50}, {"tpot_p50_ms", m.tpot_ms.p50}, {"tokens_per_s_per_stream", tps}};
  return sr;
}

ScenarioResult run_concurrency(BenchContext& ctx, ScenarioState& st) {
  const BenchOptions& o = ctx.opts;
  ScenarioResult sr{"concurrency", "Concurrency sweep: throughput vs latency, and the TTFT SLO knee", "", "ok", {}, {}, {}};
  std::vector<int> levels = o.concurrency_levels;
  if (!o.is_set("concurrency-levels") && o.short_mode) levels = {1, 2, 4};
  int in = pick(o, "input-len", o.input_len, 256, 32);
  int out = pick(o, "output-len", o.output_len, 128, 16);
  double rate = o.is_set("request-rate") ? o.request_rate : kInf;
  std::vector<int> done;
  std::vector<double> p99;
  nlohmann::json rows = nlohmann::json::array();
  bool dead_level = false, any_fail = false;
  for (int c : levels) {
    if (ctx.out_of_time()) {
      sr.details["truncated_by_time_budget"] = true;
      break;
    }
    c = std::clamp(c, 1, std::max(1, o.max_workers));
    int n = o.is_set("num-prompts") ? o.num_prompts : std::max(o.short_mode ? 2 * c : 4 * c, o.short_mode ? 4 : 8);
    auto plan = make_plan(ctx, fmt::format("concurrency={}", c),
                          scenario_prompts(ctx, static_cast<size_t>(n), in, out, o.seed + static_cast<uint64_t>(c), true),
                          c, rate);
    plan.params["concurrency"] = c;
    const auto& m = run_into(ctx, sr, plan);
    done.push_back(c);
    p99.push_back(m.ttft_ms.p99);
    dead_level |= m.completed == 0;
    any_fail |= m.failed > 0;
    rows.push_back({{"concurrency", c}, {"output_throughput", m.output_throughput},
                    {"request_throughput", m.request_throughput}, {"ttft_p50_ms", m.ttft_ms.p50},
                    {"ttft_p99_ms", m.ttft_ms.p99}, {"tpot_p50_ms", m.tpot_ms.p50}, {"tpot_p99_ms", m.tpot_ms.p99},
                    {"failed", m.failed}, {"peak_concurrency", m.peak_concurrency}});
  }
  auto knee = find_knee(done, p99, o.slo_ttft_ms);
  size_t best = 0;
  for (size_t i = 0; i < sr.metrics.size(); ++i)
    if (sr.metrics[i].output_throughput > sr.metrics[best].output_throughput) best = i;
  sr.details["levels"] = rows;
  sr.details["slo_ttft_ms"] = o.slo_ttft_ms;
  sr.details["knee_concurrency"] = knee ? nlohmann::json(*knee) : nlohmann::json(nullptr);
  if (sr.metrics.empty()) {
    sr.status = "skipped";
    sr.verdict = "no level ran (time budget exhausted)";
    return sr;
  }
  st.knee_concurrency = knee.value_or(0);
  st.best_concurrency = done[best];
  sr.verdict = fmt::format("peak {:.1f} output tok/s ({:.2f} req/s) at concurrency {}; ",
                           sr.metrics[best].output_throughput, sr.metrics[best].request_throughput, done[best]);
  if (knee)
    sr.verdict += fmt::format("p99 TTFT exceeds the {:.0f} ms SLO from concurrency {} (knee)", o.slo_ttft_ms, *knee);
  else
    sr.verdict += fmt::format("p99 TTFT within the {:.0f} ms SLO at every level up to {}", o.slo_ttft_ms, done.back());
  if (any_fail) sr.verdict += "; some requests failed";
  sr.status = dead_level ? "fail" : (any_fail ? "warn" : "ok");
  return sr;
}

ScenarioResult run_long_prompt(BenchContext& ctx) {
  const BenchOptions& o = ctx.opts;
  ScenarioResult sr{"long-prompt", "Prompts near the context limit: prefill cost and TTFT", "", "ok", {}, {}, {}};
  int ctx_len = o.context_len > 0 ? o.context_len : (ctx.max_model_len > 0 ? ctx.max_model_len : 2048);
  std::string source = o.context_len > 0 ? "option" : (ctx.max_model_len > 0 ? "server" : "default");
  if (o.short_mode && !o.is_set("context-len")) ctx_len = std::min(ctx_len, 1024);
  int out = pick(o, "output-len", o.output_len, 32, 8);
  int n = pick(o, "num-prompts", o.num_prompts, 4, 2);
  // Words -> server prompt tokens; each level's measured (words, mean prompt tokens) refines the fit
  // for the next, longer one.
  WordCalibration cal = calibrate_words(ctx);
  std::vector<double> fractions = o.short_mode ? std::vector<double>{0.5, 0.9} : std::vector<double>{0.25, 0.5, 0.75, 0.9};
  nlohmann::json rows = nlohmann::json::array();
  for (double f : fractions) {
    if (ctx.out_of_time()) {
      sr.details["truncated_by_time_budget"] = true;
      break;
    }
    const double target = std::floor(f * (ctx_len - out)) - 4;
    const int words = cal.words_for(target);
    auto plan = make_plan(ctx, fmt::format("prompt={:.0f}% of context", f * 100),
                          scenario_prompts(ctx, static_cast<size_t>(n), words, out, o.seed + static_cast<uint64_t>(f * 100), false), 1, kInf);
    plan.params["context_fraction"] = f;
    plan.params["target_prompt_tokens"] = target;
    plan.params["prompt_words"] = words;
    const auto& m = run_into(ctx, sr, plan);
    const double mean_pt = m.completed ? static_cast<double>(m.input_tokens) / m.completed : 0;
    if (cal.calibrated && m.completed && m.usage_missing == 0) {
      cal.points.emplace_back(words, mean_pt);
      cal.refit();
    }
    rows.push_back({{"fraction", f}, {"target_prompt_tokens", target}, {"prompt_tokens_mean", mean_pt},
                    {"ttft_p50_ms", m.ttft_ms.p50}, {"ttft_p99_ms", m.ttft_ms.p99},
                    {"prefill_tokens_per_s", m.ttft_ms.p50 > 0 ? mean_pt / (m.ttft_ms.p50 / 1000) : 0},
                    {"failed", m.failed}, {"failures", m.failures}});
  }
  sr.details = {{"context_len", ctx_len}, {"context_source", source}, {"levels", rows},
                {"calibrated", cal.calibrated}, {"tokens_per_word", cal.slope},
                {"template_overhead_tokens", cal.overhead}};
  if (rows.empty()) {
    sr.status = "skipped";
    sr.verdict = "no level ran (time budget exhausted)";
    return sr;
  }
  const auto& last = rows.back();
  const auto& lm = sr.metrics.back();
  if (lm.completed == 0) {
    sr.status = "fail";
    sr.verdict = fmt::format("requests at {:.0f}% of the {}-token context all failed ({}): {}",
                             last["fraction"].get<double>() * 100, ctx_len, failures_text(lm), lm.first_error);
    return sr;
  }
  const double first_ttft = rows.front()["ttft_p50_ms"].get<double>();
  sr.verdict = fmt::format("at {:.0f} prompt tokens ({:.0f}% of the {}-token context, {}): TTFT p50 {} (p99 {}), "
                           "prefill ~{:.0f} tok/s; TTFT x{:.1f} vs the shortest level",
                           last["prompt_tokens_mean"].get<double>(), last["fraction"].get<double>() * 100, ctx_len,
                           source, fmt_ms(lm.ttft_ms.p50), fmt_ms(lm.ttft_ms.p99),
                           last["prefill_tokens_per_s"].get<double>(),
                           first_ttft > 0 ? lm.ttft_ms.p50 / first_ttft : 0.0);
  bool any_fail = false;
  for (const auto& m : sr.metrics) any_fail |= m.failed > 0;
  if (any_fail) sr.verdict += "; some requests failed";
  if (!cal.calibrated) sr.verdict += " (prompt length not calibrated: server sent no usage)";
  sr.status = any_fail ? "warn" : "ok";
  return sr;
}

ScenarioResult run_long_output(BenchContext& ctx_in) {
  BenchContext ctx = ctx_in;
  ctx.opts.ignore_eos = true;  // the point is long generations
  const BenchOptions& o = ctx.opts;
  ScenarioResult sr{"long-output", "Short prompts, long generations: TPOT stability over time", "", "ok", {}, {}, {}};
  int in = pick(o, "input-len", o.input_len, 32, 16);
  int out = pick(o, "output-len", o.output_len, 1024, 64);
  int n = pick(o, "num-prompts", o.num_prompts, 8, 2);
  int conc = pick(o, "max-concurrency", o.max_concurrency, 4, 2);
  auto plan = make_plan(ctx, "long-output", scenario_prompts(ctx, static_cast<size_t>(n), in, out, o.seed, false), conc, kInf);
  const auto& m = run_into(ctx, sr, plan);
  auto d = analyze_itl_drift(sr.runs.back(), o.short_mode ? 4 : 10);
  const double mean_out = m.completed ? static_cast<double>(m.output_tokens) / m.completed : 0;
  sr.details = {{"requested_output_tokens", out}, {"mean_output_tokens", mean_out},
                {"itl_by_position_ms", d.by_position_ms}, {"early_itl_ms", d.early_ms},
                {"late_itl_ms", d.late_ms}, {"drift_pct", d.drift_pct}, {"requests_analyzed", d.requests_used}};
  if (d.requests_used == 0) {
    sr.status = m.completed ? "warn" : "fail";
    sr.verdict = fmt::format("no request streamed enough chunks to judge TPOT drift ({}; mean output {:.0f} tokens)",
                             failures_text(m), mean_out);
    return sr;
  }
  // Stable: within 20%, or within 1 ms (timer/network jitter dominates sub-millisecond gaps).
  const bool stable = std::abs(d.late_ms - d.early_ms) <= std::max(0.2 * d.early_ms, 1.0);
  sr.verdict = fmt::format("per-token gap early {} -> late {} over ~{:.0f} output tokens ({:+.1f}%): {}; TPOT p50 {}, p99 {}",
                           fmt_ms(d.early_ms), fmt_ms(d.late_ms), mean_out, d.drift_pct,
                           stable ? "stable" : (d.late_ms > d.early_ms ? "slows down as the output grows" : "speeds up"),
                           fmt_ms(m.tpot_ms.p50), fmt_ms(m.tpot_ms.p99));
  if (mean_out < 0.9 * out)
    sr.verdict += fmt::format("; outputs averaged {:.0f} of {} requested tokens (ignore_eos not honoured?)", mean_out, out);
  if (m.failed) sr.verdict += "; " + failures_text(m);
  sr.status = (!stable || m.failed) ? "warn" : "ok";
  return sr;
}

}  // namespace tmill::loadgen
