// The recovery scenario's restart mode (--restart-command CMD): a steady load at normal concurrency;
// at the start of its second phase CMD runs (`sh -c CMD`, on a thread of its own: the load goes on),
// which kills the server and starts it again. Measured: how long until the server serves again, and
// which requests the restart cost (analyze_restart: lost, refused, explicit errors).
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "core/log.h"
#include "loadgen/scenario_analysis.h"
#include "loadgen/scenarios.h"

extern char** environ;

namespace tmill::loadgen {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct CommandRun {
  std::atomic<bool> started{false};
  double start_s = 0, end_s = 0;  // run-relative
  int exit_code = -1;             // 128 + N for a signal
  std::string error;              // could not start it
};

// Runs `sh -c cmd` and waits for it.
void run_command(const std::string& cmd, CommandRun* out, std::chrono::steady_clock::time_point run_start) {
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count(); };
  out->start_s = since();
  pid_t pid = 0;
  std::string c = cmd;
  char sh[] = "sh", dash_c[] = "-c";
  char* argv[] = {sh, dash_c, c.data(), nullptr};
  if (int rc = posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv, environ); rc != 0) {
    out->error = fmt::format("cannot run /bin/sh: {}", std::strerror(rc));
    out->end_s = since();
    return;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out->end_s = since();
  out->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

}  // namespace

ScenarioResult run_recovery_restart(BenchContext& ctx) {
  const BenchOptions& o = ctx.opts;
  ScenarioResult sr{"recovery", "Server killed and restarted under load (--restart-command): time until it serves "
                                "again, requests lost", "", "ok", {}, {}, {}};
  const int normal = o.is_set("max-concurrency") ? std::max(1, o.max_concurrency) : 2;
  double durations[2] = {10, 30};  // before the command; from the command on
  if (o.short_mode) durations[0] = 2, durations[1] = 4;
  const double left = ctx.time_left_s();
  if (left < (durations[0] + durations[1]) / 0.9) {
    const double scale = std::max(0.1, left * 0.9 / (durations[0] + durations[1]));
    for (double& d : durations) d *= scale;
  }
  const int in = o.is_set("input-len") ? o.input_len : (o.short_mode ? 32 : 256);
  const int out = o.is_set("output-len") ? o.output_len : (o.short_mode ? 16 : 64);
  RunPlan plan = make_plan(ctx, "recovery (restart)", scenario_prompts(ctx, 64, in, out, o.seed, true), normal, kInf);
  plan.phases = {{"before", durations[0], normal, kInf, 1.0}, {"restart", durations[1], normal, kInf, 1.0}};
  plan.connect_failure_backoff_s = 0.05;
  plan.params["max_concurrency"] = normal;
  plan.params["phase_durations_s"] = {durations[0], durations[1]};
  plan.params["restart_command"] = o.restart_command;

  CommandRun cmd;
  std::thread runner;
  const auto t_plan = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point run_start = t_plan;
  plan.on_phase_start = [&](size_t phase, double start_s) {
    if (phase != 1 || cmd.started.exchange(true)) return;
    run_start = std::chrono::steady_clock::now() -
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(start_s));
    log_info("bench: running the restart command");  // not the command itself: it may carry secrets
    runner = std::thread(run_command, o.restart_command, &cmd, run_start);
  };
  const auto& m = run_into(ctx, sr, plan);
  if (runner.joinable()) runner.join();
  const auto& run = sr.runs.back();
  if (!cmd.started.load()) {
    sr.status = "skipped";
    sr.verdict = "the load ended before the restart phase (time budget): the command did not run";
    return sr;
  }
  const RestartAnalysis a = analyze_restart(run, cmd.start_s);
  sr.details = {{"mode", "restart"},
                {"command_start_s", cmd.start_s},
                {"command_s", cmd.end_s - cmd.start_s},
                {"command_exit_code", cmd.exit_code},
                {"outage_seen", a.outage_seen},
                {"served_again", a.served_again},
                {"time_to_serve_s", a.served_again ? nlohmann::json(a.time_to_serve_s) : nlohmann::json(nullptr)},
                {"sent", a.sent},
                {"succeeded", a.succeeded},
                {"lost", a.lost},
                {"lost_by_kind", a.lost_by_kind},
                {"refused", a.refused},
                {"explicit_errors", a.explicit_errors},
                {"before_p50_ttft_ms", a.before_p50_ms},
                {"after_p50_ttft_ms", a.after_p50_ms},
                {"concurrency", normal},
                {"phase_starts_s", run.phase_starts_s},
                {"phase_names", run.phase_names}};
  if (!cmd.error.empty()) sr.details["command_error"] = cmd.error;
  std::string lost;
  if (a.lost == 0) {
    lost = "no request lost";
  } else {
    std::string kinds;
    for (const auto& [k, n] : a.lost_by_kind) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, k);
    lost = fmt::format("{} request(s) lost in flight ({})", a.lost, kinds);
  }
  lost += fmt::format("; {} refused while down, {} explicit errors", a.refused, a.explicit_errors);
  const std::string command = !cmd.error.empty() ? cmd.error
                              : fmt::format("the command took {:.2f} s, exit {}", cmd.end_s - cmd.start_s, cmd.exit_code);
  if (!cmd.error.empty() || cmd.exit_code != 0) {
    sr.status = "fail";
    sr.verdict = fmt::format("the restart command failed ({}); {}", command, lost);
  } else if (!a.outage_seen) {
    sr.status = "warn";
    sr.verdict = fmt::format("no request failed after the restart command started ({}): did it restart the server? "
                             "({})", command, failures_text(m));
  } else if (!a.served_again) {
    sr.status = "fail";
    sr.verdict = fmt::format("the server did NOT serve again within {:.0f} s of the restart command ({}); {}",
                             durations[1], command, lost);
  } else {
    sr.verdict = fmt::format("served again {:.2f} s after the restart command started ({}); {}; TTFT p50 {} before, "
                             "{} after",
                             a.time_to_serve_s, command, lost, fmt_ms(a.before_p50_ms), fmt_ms(a.after_p50_ms));
  }
  return sr;
}

}  // namespace tmill::loadgen
