// `tokenmill serve` with vLLM's command line: what cannot mean the same here fails at once, naming
// the flag and the reason (the server never starts, so these runs are quick).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

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
                        Case{"--no-enable-chunked-prefill", "chunked prefill is always on"},
                        Case{"--enable-prefix-caching --no-enable-prefix-caching", "contradict"},
                        Case{"--gpu-memory-utilization 1.2", "must be in (0, 1]"},
                        Case{"--gpu-memory-utilization 0.0000001", "leaves nothing for the KV cache"},
                        Case{"--uvicorn-log-level loud", "expected one of trace, debug, info, warning, error, critical"},
                        Case{"--log-level warning --uvicorn-log-level error", "contradict"},
                        Case{"-dp 2", "data parallelism is not supported"},
                        Case{"--data-parallel-size=3", "data parallelism is not supported"},
                        Case{"--cpu-offload-gb 4", "weights are not offloaded"},
                        Case{"--load-format pt", "tokenmill loads GGUF files and safetensors folders"},
                        Case{"--load-format safetensors", "is a GGUF file"},  // (the default model)
                        Case{"--tokenizer /elsewhere/tokenizer.json", "the tokenizer comes from the model itself"},
                        Case{"--tokenizer-mode mistral", "tokenmill has one tokenizer"},
                        Case{"--seed -1", "expected a non-negative integer"},
                        Case{"--kv-cache-memory-bytes 1GiB --kv-cache-memory 2GiB", "contradict"},
                        Case{"--override-generation-config '{\"temperature\": \"hot\"}'", "'temperature' must be a number"},
                        Case{"--override-generation-config '[1]'", "not a JSON object"}}) {
    SCOPED_TRACE(c.args);
    auto r = test::run_command(bin() + " serve --port 0 " + c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.phrase), std::string::npos) << r.err;
  }
  // engine flags that contradict each other: refused before a model loads
  auto both = test::run_command(bin() + " serve --port 0 --async-scheduling --no-async-scheduling");
  EXPECT_EQ(both.exit_code, 1) << both.err;
  EXPECT_NE(both.err.find("--async-scheduling and --no-async-scheduling contradict"), std::string::npos) << both.err;
  // A positional MODEL beside --model is a second model (several models, issue 20): each file must load.
  auto two = test::run_command(bin() + " serve --port 0 a.gguf --model b.gguf");
  EXPECT_EQ(two.exit_code, 1) << two.err;
  EXPECT_NE(two.err.find("model a: cannot read a.gguf"), std::string::npos) << two.err;
  // --calculate-kv-scales: accepted (an fp8 cache's scales are computed anyway; another cache has none, which
  // a warning says); the model then loads
  auto scales = test::run_command(bin() + " serve --port 0 --calculate-kv-scales --kv-cache-dtype fp8 --model none.gguf");
  EXPECT_EQ(scales.exit_code, 1) << scales.err;
  EXPECT_NE(scales.err.find("computed per token and KV head"), std::string::npos) << scales.err;
  EXPECT_NE(scales.err.find("cannot open 'none.gguf'"), std::string::npos) << scales.err;
  scales = test::run_command(bin() + " serve --port 0 --calculate-kv-scales --model none.gguf");
  EXPECT_EQ(scales.exit_code, 1) << scales.err;
  EXPECT_NE(scales.err.find("--calculate-kv-scales has no effect: the KV cache is not fp8"), std::string::npos) << scales.err;
  // vLLM's flags that mean nothing here (or what tokenmill always does) are accepted: the server goes on to
  // load the model
  auto accepted = test::run_command(
      bin() + " serve --port 0 --model none.gguf --trust-remote-code --enable-auto-tool-choice --disable-log-stats "
              "--max-log-len 100 --enable-lora --max-lora-rank 64 --disable-custom-all-reduce "
              "--distributed-executor-backend mp --download-dir /tmp --max-seq-len-to-capture 8192 "
              "--disable-uvicorn-access-log --disable-fastapi-docs --enable-request-id-headers "
              "--guided-decoding-backend xgrammar -dp 1 --cpu-offload-gb 0 --load-format gguf --tokenizer none.gguf "
              "--tokenizer-mode auto --kv-cache-memory-bytes 1GiB --seed 7 --max-logprobs 5");
  EXPECT_EQ(accepted.exit_code, 1) << accepted.err;
  EXPECT_NE(accepted.err.find("cannot open 'none.gguf'"), std::string::npos) << accepted.err;
  // more of them, each logged with what it means here (a vision-language model's card carries the mm ones)
  auto more = test::run_command(
      bin() + " serve --port 0 --model none.gguf --enable-prompt-tokens-details --enable-reasoning "
              "--enable-server-load-tracking --enable-expert-parallel --fully-sharded-loras --enable-log-outputs "
              "--root-path /api -O '{\"level\": 3}' --model-impl vllm --lora-dtype auto "
              "--structured-outputs-config '{\"backend\": \"xgrammar\"}' --max-num-partial-prefills 2 "
              "--max-long-partial-prefills 1 --tokenizer-pool-size 0 --limit-mm-per-prompt '{\"image\": 0}' "
              "--mm-processor-kwargs '{}' --allowed-local-media-path /tmp --mm-encoder-tp-mode data --skip-mm-profiling "
              "--disable-mm-preprocessor-cache --otlp-traces-endpoint http://x:4317 --enable-force-include-usage "
              "--hf-overrides '{}' --config-format hf --chat-template-content-format string --response-role assistant");
  EXPECT_EQ(more.exit_code, 1) << more.err;
  EXPECT_NE(more.err.find("cannot open 'none.gguf'"), std::string::npos) << more.err;
  for (const char* said : {"--enable-prompt-tokens-details: usage.prompt_tokens_details is always given",
                           "the models are served as text models", "--root-path: routes are served at /",
                           "--otlp-traces-endpoint http://x:4317: no OpenTelemetry traces are sent"})
    EXPECT_NE(more.err.find(said), std::string::npos) << said << "\n" << more.err;
  // ... and the values or flags that cannot mean the same here are refused naming why
  for (const auto& [args, why] : std::vector<std::pair<std::string, std::string>>{
           {"--hf-overrides '{\"rope_theta\": 1}'", "config.json is read as it is"},
           {"--config-format mistral", "tokenmill reads Hugging Face config.json"},
           {"--chat-template-content-format openai", "reach the chat template as one string"},
           {"--response-role bot", "the role assistant"},
           {"--model-impl sglang", "expected auto, vllm or transformers"},
           {"--return-tokens-as-token-ids", "--return-tokens-as-token-ids: not supported"},
           {"--middleware m.f", "no Python middleware"},
           {"--logits-processors m.P", "no Python logits processors"},
           {"--long-lora-scaling-factors 4", "long-context LoRA adapters are not supported"}}) {
    SCOPED_TRACE(args);
    auto r = test::run_command(bin() + " serve --port 0 --model none.gguf " + args);
    EXPECT_EQ(r.exit_code, 2) << r.err;  // (flag errors: exit 2, as above)
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
  // Unknown flags stay errors.
  auto unknown = test::run_command(bin() + " serve --port 0 --swap-space 4");
  EXPECT_EQ(unknown.exit_code, 109) << unknown.err;  // CLI11's "arguments were not expected"
  EXPECT_NE(unknown.err.find("--swap-space"), std::string::npos) << unknown.err;
}

// --dtype, --quantization and the memory flags: checked before the server starts, or at the load.
TEST(ServeVllmFlags, DtypeQuantizationAndMemory) {
  struct Case {
    const char* args;
    const char* phrase;
  };
  for (const Case& c :
       {Case{"--dtype int4", "--dtype int4: expected auto, float16 (half), bfloat16 or float32 (float)"},
        Case{"--quantization bitsandbytes", "--quantization bitsandbytes: tokenmill does not load bitsandbytes weights"},
        Case{"--quantization awq", "is no AWQ checkpoint"},  // (the model is a GGUF file)
        Case{"--quantization fp8", "is no FP8 checkpoint"},
        Case{"--quantization q3_x", "unknown quantization type 'q3_x'"},
        Case{"--memory-limit 1000", "memory limit 750 B for the weights and KV cache (--memory-limit less "
                                          "--buffer-memory): the weights alone take"},
        Case{"--memory-limit 4MiB --kv-cache-memory 8MiB", "do not fit; lower --kv-cache-memory"},
        Case{"--memory-limit lots", "--memory-limit: "}}) {
    SCOPED_TRACE(c.args);
    auto r = test::run_command(bin() + " serve --port 0 " + c.args);
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(c.phrase), std::string::npos) << r.err;
  }
}

// --dtype converts the weights at load; the automatic KV cache stays under --memory-limit.
TEST(ServeVllmFlags, DtypeConvertsAtLoad) {
  auto r = test::run_command(bin() + " generate --dtype float16 --temperature 0 --max-tokens 8 --memory-limit 64MiB");
  EXPECT_NE(r.exit_code, 0);  // --memory-limit is serve's
  r = test::run_command(bin() + " generate --dtype float16 --temperature 0 --max-tokens 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("weights converted to F16 in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("weights F16) loaded in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("load: dtype: 100% ("), std::string::npos) << r.err;  // not a terminal: plain lines
}

// A vLLM command line of accepted flags parses: the run gets as far as the model (a missing file here).
TEST(ServeVllmFlags, AcceptedFlagsParse) {
  const std::string flags =
      " --host 127.0.0.1 --port 0 -tp 1 -pp 1 --dtype auto --max-model-len 64 --kv-cache-memory 8MiB"
      " --enable-prefix-caching --enable-chunked-prefill --max-num-seqs 4 --max-num-batched-tokens 64"
      " --served-model-name a b --api-key k --disable-log-requests --uvicorn-log-level info"
      " --generation-config vllm --quantization q8_0 --memory-limit 1GiB --enforce-eager --no-async-scheduling";
  auto r = test::run_command(bin() + " serve /nonexistent/model.gguf" + flags);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  // --no-enable-prefix-caching is --no-prefix-caching; a folder that is not a model is named
  r = test::run_command(bin() + " serve " + test::temp_dir() + " --port 0 --no-enable-prefix-caching --async-scheduling");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("a folder without config.json: not a Hugging Face model folder"), std::string::npos) << r.err;
}
