// Stress scenarios: oom-boundary (raise concurrency x length until the server rejects, preempts or
// fails; is it still alive afterwards?) and recovery (overload, then back to normal load: how long
// until latency returns to baseline, and was any request lost?).
#include <algorithm>
#include <cmath>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "loadgen/metrics_scraper.h"
#include "loadgen/scenario_analysis.h"
#include "loadgen/scenarios.h"

namespace tmill::loadgen {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

int pick_len(const BenchOptions& o, const char* name, int user_value, int preset) {
  return o.is_set(name) ? user_value : preset;
}

std::optional<double> preemptions_now(const BenchContext& ctx) {
  if (!ctx.scraper || !ctx.scraper->available()) return std::nullopt;
  MetricsSample s;
  if (!ctx.scraper->scrape_now(&s)) return std::nullopt;
  auto it = s.values.find(kPreemptions);
  if (it == s.values.end()) return std::nullopt;
  return it->second;
}

double peak_of(const BenchContext& ctx, const char* key, double t0, double t1) {
  double peak = -1;
  if (!ctx.scraper) return peak;
  for (const auto& s : ctx.scraper->samples())
    if (s.t >= t0 && s.t <= t1)
      if (auto it = s.values.find(key); it != s.values.end()) peak = std::max(peak, it->second);
  return peak;
}

bool server_alive(const BenchContext& ctx) {
  OpenAiClient c(ctx.url, ctx.api_key, 5.0);
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (c.alive(5.0).ok()) return true;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  return false;
}
}  // namespace

ScenarioResult run_oom_boundary(BenchContext& ctx_in, ScenarioState& st) {
  BenchContext ctx = ctx_in;
  ctx.opts.ignore_eos = true;  // full-length generations: the load is what the step says
  const BenchOptions& o = ctx.opts;
  ScenarioResult sr{"oom-boundary", "Raise concurrency x length until the server rejects, preempts or fails", "", "ok", {}, {}, {}};
  const int ctx_len = o.context_len > 0 ? o.context_len : (ctx.max_model_len > 0 ? ctx.max_model_len : 2048);
  const int c0 = o.short_mode ? 2 : 4, steps = o.short_mode ? 3 : 7;
  const int in0 = o.is_set("input-len") ? o.input_len : (o.short_mode ? 32 : 256);
  const int out = o.is_set("output-len") ? o.output_len : (o.short_mode ? 16 : 128);
  // Prompt lengths are in words; the cap (80% of the context, less the output) is in the server's
  // tokens, converted with a words -> tokens calibration (two probes, as long-prompt).
  const WordCalibration cal = calibrate_words(ctx);
  const int in_cap = cal.words_for(0.8 * ctx_len - out);
  nlohmann::json rows = nlohmann::json::array();
  int good_step = -1, bad_step = -1;
  for (int k = 0; k < steps; ++k) {
    if (ctx.out_of_time()) {
      sr.details["truncated_by_time_budget"] = true;
      break;
    }
    const int c = std::min(c0 << k, std::max(1, o.max_workers));
    const int in = std::min(in0 << (k / 2), in_cap);
    // Two requests per stream, short mode too: with one, a fast server can finish the first
    // requests before the last of a burst arrives (threads starting late on a loaded client), and
    // the step never holds `c` requests at once; a second round keeps `c` in flight.
    const int n = 2 * c;
    auto pre0 = preemptions_now(ctx);
    const double t_start = ctx.now_s();
    auto plan = make_plan(ctx, fmt::format("step {}: {} x ({}+{})", k + 1, c, in, out),
                          scenario_prompts(ctx, static_cast<size_t>(n), in, out, o.seed + static_cast<uint64_t>(k), false), c, kInf);
    plan.params["concurrency"] = c;
    plan.params["input_len"] = in;
    plan.params["output_len"] = out;
    const auto& m = run_into(ctx, sr, plan);
    auto pre1 = preemptions_now(ctx);
    const double preempted = pre0 && pre1 ? std::max(0.0, *pre1 - *pre0) : 0.0;
    const double kv_peak = peak_of(ctx, kKvUsage, t_start, ctx.now_s());
    // Tokens per request: the server's prompt token counts (usage) when it reported them, else the
    // calibrated estimate.
    const int prompt_tokens = m.completed && m.usage_missing == 0
                                  ? static_cast<int>(std::lround(static_cast<double>(m.input_tokens) / m.completed))
                                  : static_cast<int>(std::lround(cal.overhead + cal.slope * in));
    rows.push_back({{"step", k + 1}, {"concurrency", c}, {"input_len", in}, {"prompt_tokens", prompt_tokens},
                    {"output_len", out}, {"tokens_in_flight", c * (prompt_tokens + out)},
                    {"completed", m.completed}, {"failed", m.failed},
                    {"failures", m.failures}, {"preemptions", preempted},
                    {"kv_cache_usage_peak", kv_peak >= 0 ? nlohmann::json(kv_peak) : nlohmann::json(nullptr)},
                    {"ttft_p99_ms", m.ttft_ms.p99}, {"peak_concurrency", m.peak_concurrency}});
    if (m.failed > 0 || preempted > 0) {
      bad_step = k;
      break;
    }
    good_step = k;
  }
  const bool alive = server_alive(ctx);
  sr.details = {{"steps", rows}, {"server_alive_after", alive}, {"context_len", ctx_len},
                {"metrics_available", ctx.scraper && ctx.scraper->available()},
                {"calibrated", cal.calibrated}, {"tokens_per_word", cal.slope}};
  if (rows.empty()) {
    sr.status = "skipped";
    sr.verdict = "no step ran (time budget exhausted)";
    return sr;
  }
  std::string v;
  if (good_step >= 0) {
    const auto& g = rows[static_cast<size_t>(good_step)];
    st.max_error_free_concurrency = g["concurrency"].get<int>();
    v = fmt::format("largest error-free load: {} concurrent x ({} prompt + {} output tokens) = {} tokens in flight",
                    g["concurrency"].get<int>(), g["prompt_tokens"].get<int>(), g["output_len"].get<int>(),
                    g["tokens_in_flight"].get<int>());
  } else {
    v = "even the first step failed";
  }
  bool lost = false;
  if (bad_step >= 0) {
    const auto& b = rows[static_cast<size_t>(bad_step)];
    const auto& bm = sr.metrics[static_cast<size_t>(bad_step)];
    v += fmt::format("; beyond it ({} concurrent x {} tokens): {}", b["concurrency"].get<int>(),
                     b["prompt_tokens"].get<int>() + out, failures_text(bm));
    if (b["preemptions"].get<double>() > 0) v += fmt::format(", {:.0f} preemptions", b["preemptions"].get<double>());
    for (const auto& [kind, cnt] : bm.failures) lost |= kind.rfind("http_", 0) != 0 && kind != "stream_error";
  } else {
    v += "; no rejection, preemption or failure up to the last step (boundary not reached)";
  }
  v += alive ? "; server alive afterwards" : "; SERVER NOT RESPONDING afterwards";
  sr.verdict = v;
  sr.status = !alive || good_step < 0 ? "fail" : (lost ? "warn" : "ok");
  return sr;
}

ScenarioResult run_recovery(BenchContext& ctx, ScenarioState& st) {
  if (!ctx.opts.restart_command.empty()) return run_recovery_restart(ctx);
  const BenchOptions& o = ctx.opts;
  ScenarioResult sr{"recovery", "Overload, then normal load: time to return to baseline latency, lost requests", "", "ok", {}, {}, {}};
  const int normal = o.is_set("max-concurrency") ? std::max(1, o.max_concurrency) : (o.short_mode ? 1 : 2);
  int over = st.knee_concurrency > 0 ? 2 * st.knee_concurrency
             : st.max_error_free_concurrency > 0 ? 2 * st.max_error_free_concurrency
                                                 : (o.short_mode ? 8 : 64);
  over = std::clamp(over, normal + 1, std::max(normal + 1, o.max_workers));
  double durations[3] = {20, 20, 30};
  if (o.short_mode) durations[0] = 3, durations[1] = 3, durations[2] = 5;
  const double planned = durations[0] + durations[1] + durations[2];
  const double left = ctx.time_left_s();
  if (left < planned / 0.9) {
    const double scale = std::max(0.1, left * 0.9 / planned);
    for (double& d : durations) d *= scale;
  }
  const int in = pick_len(o, "input-len", o.input_len, o.short_mode ? 32 : 256);
  const int out = pick_len(o, "output-len", o.output_len, o.short_mode ? 16 : 64);
  RunPlan plan = make_plan(ctx, "recovery", scenario_prompts(ctx, 64, in, out, o.seed, true), normal, kInf);
  plan.phases = {{"baseline", durations[0], normal, kInf, 1.0},
                 {"overload", durations[1], over, kInf, 1.0},
                 {"after", durations[2], normal, kInf, 1.0}};
  plan.params["max_concurrency"] = nullptr;  // varies by phase
  plan.params["normal_concurrency"] = normal;
  plan.params["overload_concurrency"] = over;
  plan.params["phase_durations_s"] = {durations[0], durations[1], durations[2]};
  const auto& m = run_into(ctx, sr, plan);
  const auto& run = sr.runs.back();
  auto a = analyze_recovery(run, 1.5);
  sr.details = {{"baseline_p50_ttft_ms", a.baseline_p50_ms}, {"overload_p50_ttft_ms", a.overload_p50_ms},
                {"after_p50_ttft_ms", a.after_p50_ms}, {"recovered", a.recovered},
                {"recovery_s", a.recovered ? nlohmann::json(a.recovery_s) : nlohmann::json(nullptr)},
                {"window", a.window}, {"factor", 1.5}, {"slack_ms", kRecoverySlackMs}, {"limit_ms", a.limit_ms}, {"sent", a.sent}, {"succeeded", a.succeeded},
                {"explicit_errors", a.explicit_errors}, {"lost", a.lost},
                {"phase_starts_s", run.phase_starts_s}, {"phase_names", run.phase_names},
                {"overload_end_s", a.overload_end_s}, {"normal_concurrency", normal}, {"overload_concurrency", over}};
  if (a.baseline_p50_ms <= 0) {
    sr.status = "fail";
    sr.verdict = fmt::format("no successful baseline request ({}): cannot judge recovery", failures_text(m));
    return sr;
  }
  std::string lost = a.lost == 0 ? fmt::format("no request lost ({} explicit error responses)", a.explicit_errors)
                                 : fmt::format("{} requests LOST without an error response (timeouts/drops), {} explicit errors",
                                               a.lost, a.explicit_errors);
  if (a.recovered)
    sr.verdict = fmt::format("latency back to baseline {:.1f} s after the overload ended (rolling p50 TTFT <= {}: "
                             "1.5 x baseline {}, at least baseline + {:.0f} ms; overload p50 {} at concurrency {}); {}",
                             a.recovery_s, fmt_ms(a.limit_ms), fmt_ms(a.baseline_p50_ms), kRecoverySlackMs,
                             fmt_ms(a.overload_p50_ms), over, lost);
  else
    sr.verdict = fmt::format("latency did NOT return to {} (1.5 x baseline {}, at least baseline + {:.0f} ms) within "
                             "{:.0f} s (p50 after: {}, overload: {}); {}",
                             fmt_ms(a.limit_ms), fmt_ms(a.baseline_p50_ms), kRecoverySlackMs, durations[2],
                             fmt_ms(a.after_p50_ms), fmt_ms(a.overload_p50_ms), lost);
  sr.status = (a.lost > 0 || !a.recovered) ? "fail" : "ok";
  return sr;
}

}  // namespace tmill::loadgen
