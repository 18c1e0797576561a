// vLLM's `--config FILE.yaml` (issue 21): a YAML mapping of command-line options for any subcommand;
// the command line wins over the file; bad files fail naming the file, the key and the line.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.h"

using namespace tmill;

namespace {
std::string bin() { return test::tokenmill_binary(); }
std::string write(const std::string& name, const std::string& text) {
  const std::string p = test::temp_dir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}
}  // namespace

TEST(ConfigFile, OptionsFromYamlAndTheCommandLineWins) {
  const std::string cfg = write("gen.yaml",
                                "prompt: Once upon a time\n"
                                "max_tokens: 3\n"        // underscores as in vLLM's files
                                "temperature: 0\n"
                                "json: true\n"           // a flag
                                "ignore-eos: false\n");  // false: left out
  auto r = test::run_command(bin() + " generate --config " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"].size(), 3u);
  // the command line's --max-tokens wins over the file's
  r = test::run_command(bin() + " generate --config=" + cfg + " --max-tokens 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tokens"].size(), 5u);
  // the same tokens as without a file
  auto plain = test::run_command(bin() + " generate --prompt 'Once upon a time' --max-tokens 5 --temperature 0 --json");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(plain.out)["tokens"], nlohmann::json::parse(r.out)["tokens"]);
}

TEST(ConfigFile, BadFilesNameTheProblem) {
  auto r = test::run_command(bin() + " serve --config /nonexistent/tm.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--config /nonexistent/tm.yaml: cannot read the file"), std::string::npos) << r.err;
  r = test::run_command(bin() + " serve --config " + write("nested.yaml", "port: 1\nhost: {a: 2}\n"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("line 2: 'host' must be a value or a list of values"), std::string::npos) << r.err;
  r = test::run_command(bin() + " serve --config " + write("list.yaml", "- a\n- b\n"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("must be a mapping"), std::string::npos) << r.err;
  r = test::run_command(bin() + " serve --config " + write("broken.yaml", "port: [1\n"));
  EXPECT_EQ(r.exit_code, 2);
  r = test::run_command(bin() + " serve --config a.yaml --config b.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("more than once"), std::string::npos) << r.err;
  // an option the subcommand does not know stays an error, as on the command line
  r = test::run_command(bin() + " serve --config " + write("unknown.yaml", "swap-space: 4\n"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("swap-space"), std::string::npos) << r.err;
  // vLLM's refusals apply to options from a file too
  r = test::run_command(bin() + " serve --config " + write("tp.yaml", "tensor-parallel-size: 2\n"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tensor parallelism is not supported"), std::string::npos) << r.err;
}
