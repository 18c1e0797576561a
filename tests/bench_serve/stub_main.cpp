// tm_stub_openai_server: the test stub (tests/unit/loadgen/stub_server.h) as a process, for tests that
// run the real CLI against it (the headless-Chromium report test).
//   tm_stub_openai_server --port-file F [--ttft-ms N] [--itl-ms N] [--max-parallel N]
//                         [--reject-above N] [--max-model-len N] [--lifetime S]
// Writes the chosen port to F once listening; exits on SIGTERM/SIGINT or after --lifetime seconds
// (a safety net so a failed test never leaves it running).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "stub_server.h"

int main(int argc, char** argv) {
  tmill::test::StubConfig cfg;
  std::string port_file;
  int lifetime_s = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--port-file") port_file = v;
    else if (k == "--ttft-ms") cfg.ttft_ms = std::atoi(v);
    else if (k == "--itl-ms") cfg.itl_ms = std::atoi(v);
    else if (k == "--max-parallel") cfg.max_parallel = std::atoi(v);
    else if (k == "--reject-above") cfg.reject_above = std::atoi(v);
    else if (k == "--max-model-len") cfg.max_model_len = std::atoi(v);
    else if (k == "--lifetime") lifetime_s = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts: they inherit the mask
  tmill::test::StubServer stub(cfg);
  if (!port_file.empty()) {
    std::string tmp = port_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "%d\n", stub.port());
    std::fclose(f);
    std::rename(tmp.c_str(), port_file.c_str());
  }
  std::printf("listening on %s\n", stub.url().c_str());
  std::fflush(stdout);
  struct timespec ts = {lifetime_s, 0};
  sigtimedwait(&set, nullptr, &ts);
  stub.stop();
  return 0;
}
