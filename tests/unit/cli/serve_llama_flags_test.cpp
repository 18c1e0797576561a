// `tokenmill serve` with llama-server's command line (tools/commands/serve_llama.h): what means the
// same is mapped, what tokenmill always does is accepted, the rest exits 2 naming why; a typical
// llama-server line serves.
#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

using namespace tmill;

namespace {
std::string bin() { return test::tokenmill_binary(); }
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(ServeLlamaFlags, RefusedFlagsNameTheReason) {
  struct Case {
    const char* args;
    const char* phrase;
  };
  for (const Case& c : {Case{"-ctk q5_1", "--cache-type q5_1: not a KV cache type here"},
                        Case{"-ctk q8_0 -ctv f16", "keys and values share one type here"},
                        Case{"-ctk q8_0 --kv-cache-dtype f16", "contradict"},
                        Case{"-nocb", "continuous batching is always on"},
                        Case{"-fa maybe", "--flash-attn maybe: expected on, off or auto"},
                        Case{"-c 512 --max-model-len 256", "--ctx-size and --max-model-len contradict"},
                        Case{"--alias a --served-model-name b", "--alias and --served-model-name contradict"},
                        Case{"--top-p 2", "--top-p must be in (0, 1]"},
                        Case{"--temp -1.5", "--temp must not be negative"},
                        Case{"-np 0", "--parallel must be at least 1"},
                        Case{"-n -5", "--n-predict must be -1"},
                        Case{"--reasoning-format xml", "expected none, auto or deepseek"},
                        Case{"--reranking --pooling mean", "--reranking and --pooling contradict"},
                        Case{"--threads-http -5", "--threads-http must be in [1, 65536]"},
                        Case{"--slots --no-slots", "--slots and --no-slots contradict"}}) {
    SCOPED_TRACE(c.args);
    auto r = test::run_command(bin() + " serve --port 0 " + c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(has(r.err, c.phrase)) << r.err;
  }
  // llama.cpp's device names: none is the CPU, CUDA0 the GPU; another GPU is refused as the flag is read
  auto dev = test::run_command(bin() + " serve --port 0 -dev CUDA1");
  EXPECT_NE(dev.exit_code, 0);
  EXPECT_TRUE(has(dev.err + dev.out, "--device CUDA1: one GPU, the first (CUDA0 or cuda)")) << dev.err << dev.out;
}

// A llama-server command line as its users write it: the model, context, slots, an 8-bit cache, flash
// attention, continuous batching, Jinja, metrics, an alias, threads, GPU layers, sampling defaults and a
// default length -- the server comes up serving it under the alias with the mapped settings.
TEST(ServeLlamaFlags, ALlamaServerCommandLineServes) {
  const std::string log = test::temp_dir() + "/serve-llama.log";
  auto r = test::run_command(
      bin() + " serve --port 0 -m " + test::source_path("models/stories260K/stories260K.gguf") +
      " -c 256 -np 2 -ctk q8_0 -ctv q8_0 -fa on -cb --jinja --metrics --alias storyteller -t 1 -ngl 99 -ub 512 -b 256"
      " -dev none --slots --props --slot-save-path /tmp/slots"
      " --temp 0.5 --top-k 20 -n 64 --mlock --no-mmap --override-generation-config '{\"max_new_tokens\": 32}' 2>" + log +
      " & p=$!; for i in $(seq 400); do grep -q 'ready:' " + log +
      " && break; kill -0 $p 2>/dev/null || break; sleep 0.05; done; kill -TERM $p 2>/dev/null;"
      " wait $p; s=$?; cat " + log + " >&2; exit $s");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "ready: serving storyteller (max_model_len 256)")) << r.err;  // --alias, -c
  EXPECT_TRUE(has(r.err, "int8), max_model_len 256")) << r.err;                       // -ctk/-ctv q8_0
  EXPECT_TRUE(has(r.err, "for 2 sequences of 256 tokens")) << r.err;                  // -np 2
  // (and vLLM's --override-generation-config beside them)
  EXPECT_TRUE(has(r.err, "sampling defaults from the command line: temperature 0.5, top_k 20, max_tokens 32")) << r.err;
  EXPECT_TRUE(has(r.err, "--n-gpu-layers 99: layers are not offloaded one by one")) << r.err;
  EXPECT_TRUE(has(r.err, "--props: POST /props is not served")) << r.err;
  EXPECT_TRUE(has(r.err, "--slot-save-path /tmp/slots: POST /slots/ID?action=save|restore answers 501")) << r.err;
}
