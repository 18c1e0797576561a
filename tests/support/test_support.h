// Helpers shared by the unit tests.
#pragma once

#include <cstdlib>
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

// True in the sanitized build (AddressSanitizer). The CUDA emulator's whole-model runs (every CUDA
// thread a fiber, each switch told to the sanitizer) take minutes there instead of seconds; they
// skip under it, saying so -- the release pass runs them, and the kernels' own tests on the emulator
// (GpuKernelsOnEmu.*) stay in the sanitized pass, which is where out-of-bounds kernels show.
constexpr bool sanitized_build() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}
// The CUDA emulator's whole-model runs skip here: the sanitized build, unless TM_TEST_EMU_UNDER_ASAN is
// set (then they run, in minutes).
inline bool skip_emulator_model_runs() { return sanitized_build() && !std::getenv("TM_TEST_EMU_UNDER_ASAN"); }
// The first line of a test that runs whole engines on the CUDA emulator: skips it there, saying why.
#define TM_SKIP_EMULATOR_ENGINE_RUNS()                                                                    \
  if (::tmill::test::skip_emulator_model_runs())                                                          \
  GTEST_SKIP() << "the CUDA emulator's engine runs: the release build runs them (minutes under ASan; " \
                  "TM_TEST_EMU_UNDER_ASAN=1 runs them here)"

}  // namespace tmill::test
