// Helpers shared by the unit tests.
#pragma once

#include <string>

namespace tmill::test {

// Absolute path of a file in the source tree ("tests/data/...").
std::string source_path(const std::string& rel);
// The built CLI ($TM_BINARY, set by ctest).
std::string tokenmill_binary();
// A fresh temporary directory, removed at process exit.
std::string temp_dir();

struct CommandOutput {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs a shell command line, capturing stdout and stderr.
CommandOutput run_command(const std::string& cmdline);

}  // namespace tmill::test
