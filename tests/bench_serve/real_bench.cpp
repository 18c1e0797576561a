#include "real_bench.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/mmap.h"
#include "test_support.h"

namespace tmill::test {

namespace fs = std::filesystem;

std::string artifact_dir(const std::string& name) {
  const char* root = std::getenv("TM_BENCH_SERVE_OUT");
  if (!root || !*root) return temp_dir();
  fs::path p = fs::path(root) / name;
  std::error_code ec;
  fs::remove_all(p, ec);
  fs::create_directories(p);
  return p.string();
}

std::unique_ptr<ServeProcess> start_server(const std::string& dir, const std::vector<std::string>& args) {
  auto s = ServeProcess::start(tokenmill_binary(), args, dir + "/serve.log");
  if (!s.ok()) {
    ADD_FAILURE() << "cannot start tokenmill serve: " << s.error();
    return nullptr;
  }
  return std::move(*s);
}

BenchCli run_bench_cli(const ServeProcess& srv, const std::string& args, const std::string& dir,
                       const std::string& name, int timeout_s) {
  const std::string json_path = dir + "/" + name + ".json";
  std::error_code ec;
  fs::remove(json_path, ec);
  const std::string cmd = "timeout -k 10 " + std::to_string(timeout_s) + " '" + tokenmill_binary() +
                          "' bench serve --base-url " + srv.url() + " --no-progress " + args + " --json '" +
                          json_path + "'";
  CommandOutput r = run_command(cmd);
  BenchCli b;
  b.exit_code = r.exit_code;
  b.out = r.out;
  b.err = r.err;
  (void)write_file(dir + "/" + name + ".stderr.txt", r.err.data(), r.err.size());
  (void)write_file(dir + "/" + name + ".stdout.txt", r.out.data(), r.out.size());
  if (auto text = read_file(json_path); text.ok()) b.report = nlohmann::json::parse(*text, nullptr, false);
  if (b.report.is_discarded()) b.report = nullptr;
  return b;
}

double delta(const std::map<std::string, double>& before, const std::map<std::string, double>& after,
             const std::string& name) {
  auto get = [&](const std::map<std::string, double>& m) {
    auto it = m.find(name);
    return it == m.end() ? 0.0 : it->second;
  };
  return get(after) - get(before);
}

}  // namespace tmill::test
