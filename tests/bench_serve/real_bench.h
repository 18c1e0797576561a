// Shared by the real-server tests of `tokenmill bench serve` (real_*_test.cpp): where artifacts go,
// running the CLI against a server, and reading /metrics deltas.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "serve_process.h"

namespace tmill::test {

// A fresh directory for one test's artifacts (server log, JSON/HTML reports, bench stderr):
// $TM_BENCH_SERVE_OUT/NAME when ctest sets it (kept for inspection), else a temporary directory.
std::string artifact_dir(const std::string& name);

// Starts `tokenmill serve` (the built binary) with ARGS; the log goes to DIR/serve.log.
std::unique_ptr<ServeProcess> start_server(const std::string& dir, const std::vector<std::string>& args);

struct BenchCli {
  int exit_code = -1;
  std::string out, err;     // stdout (summary tables), stderr (log)
  nlohmann::json report;    // the --json file (null when missing or unparsable)
};
// Runs `tokenmill bench serve --base-url URL --no-progress ARGS --json DIR/NAME.json` under
// coreutils `timeout` (a hung run fails the test instead of stalling ctest).
BenchCli run_bench_cli(const ServeProcess& srv, const std::string& args, const std::string& dir,
                       const std::string& name, int timeout_s = 600);

// after[name] - before[name] (0 when absent from both).
double delta(const std::map<std::string, double>& before, const std::map<std::string, double>& after,
             const std::string& name);

}  // namespace tmill::test
