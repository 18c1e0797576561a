// Every `tokenmill serve` flag is also TOKENMILL_<FLAG> (tools/env_options.h, docs/deploy.md):
// the environment sets flags, the command line wins over it, it wins over a --config file, and
// TOKENMILL_CONFIG names the file. Servers run until ready, then SIGTERM (drain, exit 0).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_support.h"

using namespace tmill;

namespace {
std::string bin() { return test::tokenmill_binary(); }
std::string write(const std::string& name, const std::string& text) {
  const std::string p = test::temp_dir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}
// Starts serve with `env`, waits (up to 20 s) for its "ready:" line, then SIGTERM; err is its log,
// exit_code the server's status.
test::CommandOutput serve_briefly(const std::string& env, const std::string& args = "") {
  const std::string log = test::temp_dir() + "/serve.log";
  auto r = test::run_command("env " + env + " " + bin() + " serve --port 0 --threads 1 " + args + " 2>" + log +
                             " & p=$!; for i in $(seq 400); do grep -q 'ready:' " + log +
                             " && break; kill -0 $p 2>/dev/null || break; sleep 0.05; done; kill -TERM $p 2>/dev/null;"
                             " wait $p; s=$?; cat " + log + " >&2; exit $s");
  return r;
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(ServeEnv, FlagsFromTheEnvironmentAndTheirPrecedence) {
  const std::string cfg = write("env.yaml", "host: 127.0.0.3\nserved-model-name: fromfile\nmax-num-seqs: 4\n");
  // TOKENMILL_CONFIG names the file; TOKENMILL_HOST wins over its host; its other keys apply.
  auto r = serve_briefly("TOKENMILL_CONFIG=" + cfg + " TOKENMILL_HOST=127.0.0.2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "listening on http://127.0.0.2:")) << r.err;
  EXPECT_TRUE(has(r.err, "ready: serving fromfile")) << r.err;
  // The command line wins over the environment (and names its own --config).
  r = serve_briefly("TOKENMILL_HOST=127.0.0.2 TOKENMILL_SERVED_MODEL_NAME=fromenv", "--host 127.0.0.4");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "listening on http://127.0.0.4:")) << r.err;
  EXPECT_TRUE(has(r.err, "ready: serving fromenv")) << r.err;
  r = serve_briefly("TOKENMILL_CONFIG=/nonexistent.yaml TOKENMILL_SERVED_MODEL_NAME=fromenv", "--config " + cfg);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "ready: serving fromenv")) << r.err;
}

TEST(ServeEnv, EnvironmentValuesAreCheckedLikeFlags) {
  // vLLM's flags too: TOKENMILL_TENSOR_PARALLEL_SIZE is --tensor-parallel-size.
  auto r = test::run_command("env TOKENMILL_TENSOR_PARALLEL_SIZE=2 " + bin() + " serve --port 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "tensor parallelism is not supported")) << r.err;
  r = test::run_command("env TOKENMILL_MAX_CONNECTIONS=0 " + bin() + " serve --port 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.err + r.out, "--max-connections")) << r.err << r.out;
  // A flag takes 0/1: TOKENMILL_NO_ENABLE_CHUNKED_PREFILL=1 is the refused vLLM flag, =0 is not given.
  r = test::run_command("env TOKENMILL_NO_ENABLE_CHUNKED_PREFILL=1 " + bin() + " serve --port 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "chunked prefill is always on")) << r.err;
  r = serve_briefly("TOKENMILL_NO_ENABLE_CHUNKED_PREFILL=0");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // --help names each option's variable; other commands take no TOKENMILL_* flags.
  r = test::run_command(bin() + " serve --help");
  EXPECT_TRUE(has(r.out, "TOKENMILL_MAX_MODEL_LEN")) << r.out;
  EXPECT_TRUE(has(r.out, "TOKENMILL_PORT")) << r.out;
  r = test::run_command("env TOKENMILL_MAX_TOKENS=1000000000 " + bin() + " generate --max-tokens 2 --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}
