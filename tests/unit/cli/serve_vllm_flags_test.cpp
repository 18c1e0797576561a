// `tokenmill serve` with vLLM's command line: what cannot mean the same here fails at once, naming
// the flag and the reason (the server never starts, so these runs are quick).
#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

using namespace tmill;

namespace {
std::string bin() { return test::tokenmill_binary(); }
}  // namespace

TEST(ServeVllmFlags, RefusedFlagsNameTheReason) {
  struct Case {
    const char* args;
    const char* phrase;
  };
  for (const Case& c : {Case{"-tp 2", "tensor parallelism is not supported"},
                        Case{"--tensor-parallel-size=4", "tensor parallelism is not supported"},
                        Case{"-pp 2", "pipeline parallelism is not supported"},
                        Case{"--dtype bfloat16", "only auto is accepted"},
                        Case{"--no-enable-chunked-prefill", "chunked prefill is always on"},
                        Case{"--enable-prefix-caching --no-enable-prefix-caching", "contradict"},
                        Case{"--gpu-memory-utilization 1.2", "must be in (0, 1]"},
                        Case{"--gpu-memory-utilization 0.0000001", "leaves nothing for the KV cache"},
                        Case{"--uvicorn-log-level loud", "expected one of trace, debug, info, warning, error, critical"},
                        Case{"--log-level warning --uvicorn-log-level error", "contradict"}}) {
    SCOPED_TRACE(c.args);
    auto r = test::run_command(bin() + " serve --port 0 " + c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.phrase), std::string::npos) << r.err;
  }
  // A positional MODEL beside --model is a second model (several models, issue 20): each file must load.
  auto two = test::run_command(bin() + " serve --port 0 a.gguf --model b.gguf");
  EXPECT_EQ(two.exit_code, 1) << two.err;
  EXPECT_NE(two.err.find("model a: cannot read a.gguf"), std::string::npos) << two.err;
  // Unknown flags stay errors.
  auto unknown = test::run_command(bin() + " serve --port 0 --swap-space 4");
  EXPECT_NE(unknown.exit_code, 0);
}
