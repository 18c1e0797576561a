// The tokenmill binary as users run it: golden output of the default model, --json, --prompts-file.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.h"

using namespace tmill;

namespace {
std::string bin() { return test::tokenmill_binary(); }
std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}
}  // namespace

// The foundation's golden test: greedy 200 tokens from BOS on the bundled default model print
// exactly llama2.c's run.c output (trailing newline aside).
TEST(GenerateCli, DefaultModelGreedyMatchesLlama2c) {
  auto r = test::run_command(bin() + " generate --temperature 0 --max-tokens 200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string expected = slurp(test::source_path("models/stories260K/expected_greedy_200.txt"));
  auto strip = [](std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  };
  EXPECT_EQ(strip(r.out), strip(expected));
}

// Every ISA path (forced with TOKENMILL_ISA) gives the same greedy story.
TEST(GenerateCli, EveryIsaPathGivesTheSameGreedyOutput) {
  std::string expected = slurp(test::source_path("models/stories260K/expected_greedy_200.txt"));
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  for (const char* isa : {"scalar", "avx2", "avx512", "amx"}) {
    auto r = test::run_command(std::string("TOKENMILL_ISA=") + isa + " " + bin() +
                               " generate --temperature 0 --max-tokens 200 --no-stream");
    ASSERT_EQ(r.exit_code, 0) << isa << ": " << r.err;
    std::string got = r.out;
    while (!got.empty() && got.back() == '\n') got.pop_back();
    EXPECT_EQ(got, expected) << "isa " << isa;
  }
}

TEST(GenerateCli, JsonOutput) {
  auto r = test::run_command(bin() + " generate --prompt 'Once upon a time' --temperature 0 --max-tokens 20 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["prompt_tokens"].is_array());
  EXPECT_EQ(j["prompt_tokens"][0], 1);  // BOS added: the model's metadata says add_bos
  EXPECT_GT(j["prompt_tokens"].size(), 2u);
  EXPECT_EQ(j["tokens"].size(), 20u);
  EXPECT_FALSE(j["text"].get<std::string>().empty());
  // same prompt without --json prints the same text
  auto plain = test::run_command(bin() + " generate --prompt 'Once upon a time' --temperature 0 --max-tokens 20");
  ASSERT_EQ(plain.exit_code, 0);
  std::string t = plain.out;
  if (!t.empty() && t.back() == '\n') t.pop_back();
  EXPECT_EQ(t, j["text"].get<std::string>());
}

TEST(GenerateCli, PromptsFileKeepsInputOrderAndMatchesSingleRuns) {
  std::string dir = test::temp_dir();
  std::ofstream(dir + "/p.jsonl") << R"({"prompt": "Lily went to the park", "max_tokens": 30, "temperature": 0})" "\n"
                                  << R"({"prompt": "Tom had a red ball", "max_tokens": 5, "temperature": 0})" "\n"
                                  << "\n"
                                  << R"({"prompt": "The sun", "max_tokens": 17, "temperature": 1.0, "seed": 3})" "\n";
  auto r = test::run_command(bin() + " generate --prompts-file " + dir + "/p.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<nlohmann::json> lines;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["tokens"].size(), 30u);
  EXPECT_EQ(lines[1]["tokens"].size(), 5u);
  EXPECT_EQ(lines[2]["tokens"].size(), 17u);
  auto single = test::run_command(bin() + " generate --prompt 'Tom had a red ball' --temperature 0 --max-tokens 5 --json");
  ASSERT_EQ(single.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(single.out)["tokens"], lines[1]["tokens"]);
  auto seeded = test::run_command(bin() + " generate --prompt 'The sun' --temperature 1.0 --seed 3 --max-tokens 17 --json");
  EXPECT_EQ(nlohmann::json::parse(seeded.out)["tokens"], lines[2]["tokens"]);
}

TEST(GenerateCli, BadInputFailsClearly) {
  auto r = test::run_command(bin() + " generate --model /nonexistent.gguf");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent.gguf"), std::string::npos);
  std::string dir = test::temp_dir();
  std::ofstream(dir + "/bad.jsonl") << "{not json\n";
  r = test::run_command(bin() + " generate --prompts-file " + dir + "/bad.jsonl");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("bad.jsonl:1"), std::string::npos);
}

// --speculative-model FILE (vLLM's older flag, llama-server's --model-draft) and --num-speculative-tokens:
// the default model drafting for itself keeps the golden greedy story; contradictions fail clearly.
TEST(GenerateCli, SpeculativeModelFlagKeepsTheGreedyStory) {
  std::string expected = slurp(test::source_path("models/stories260K/expected_greedy_200.txt"));
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  const std::string draft = test::source_path("models/stories260K/stories260K.gguf");
  for (const std::string flags : {" --speculative-model " + draft, " --model-draft " + draft + " --draft-max 2"}) {
    auto r = test::run_command(bin() + " generate --temperature 0 --max-tokens 200 --no-stream" + flags);
    ASSERT_EQ(r.exit_code, 0) << flags << ": " << r.err;
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    EXPECT_EQ(out, expected) << flags;
  }
  auto both = test::run_command(bin() + " generate --max-tokens 4 --speculative-model " + draft +
                                " --speculative-config '{\"method\": \"ngram\"}'");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("--speculative-model and --speculative-config both given"), std::string::npos) << both.err;
  auto lone = test::run_command(bin() + " generate --max-tokens 4 --num-speculative-tokens 3");
  EXPECT_NE(lone.exit_code, 0);
  EXPECT_NE(lone.err.find("--num-speculative-tokens needs"), std::string::npos) << lone.err;
}

// vLLM's --device: auto runs on the CPU; cuda exits with the engine's reason (this build has no CUDA
// backend, or no device, or the engine does not run on one yet) instead of an unknown-option error.
TEST(GenerateCli, DeviceFlag) {
  auto cpu = test::run_command(bin() + " generate --max-tokens 4 --device auto");
  EXPECT_EQ(cpu.exit_code, 0) << cpu.err;
  auto cuda = test::run_command(bin() + " generate --max-tokens 4 --device cuda");
  EXPECT_NE(cuda.exit_code, 0);
  EXPECT_NE(cuda.err.find("--device cuda: "), std::string::npos) << cuda.err;
  EXPECT_NE(cuda.err.find("use --device cpu"), std::string::npos) << cuda.err;
  // serve refuses it before it listens (a server that started would be killed by timeout: 124)
  auto serve = test::run_command("timeout 30 " + bin() + " serve --device cuda --port 18931");
  EXPECT_EQ(serve.exit_code, 1) << serve.err;
  EXPECT_EQ(serve.err.find("listening on"), std::string::npos) << serve.err;
  EXPECT_NE(serve.err.find("--device cuda: "), std::string::npos) << serve.err;
}

// --gpu-memory-utilization sizes a GPU device's plan (cuda-emu: a 4 GiB emulated device) in generate
// and serve alike: the log names the share; too small a share is the GPU plan's error (serve, too:
// before 2026-12-05 it took cuda-emu for the CPU and sized a KV cache from host RAM). (bench engine
// sizes its KV cache in tokens for its batch, which wins over a share, as an explicit size does in vLLM.)
TEST(GenerateCli, GpuMemoryUtilizationSizesTheDevicesPlan) {
  auto g = test::run_command(bin() + " generate --max-tokens 2 --device cuda-emu --gpu-memory-utilization 0.3");
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.err.find("budget (0.3 x 4.00 GiB)"), std::string::npos) << g.err;
  auto bad = test::run_command(bin() + " generate --max-tokens 2 --gpu-memory-utilization 1.5");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--gpu-memory-utilization must be in (0, 1]"), std::string::npos) << bad.err;
  auto serve = test::run_command("timeout 60 " + bin() + " serve --port 0 --device cuda-emu --gpu-memory-utilization 0.0000001");
  EXPECT_EQ(serve.exit_code, 1) << serve.err;
  EXPECT_NE(serve.err.find("out of GPU memory"), std::string::npos) << serve.err;
  EXPECT_NE(serve.err.find("raise --gpu-memory-utilization"), std::string::npos) << serve.err;
}

TEST(BenchEngineCli, JsonShape) {
  auto r = test::run_command(bin() + " bench engine --batch 1,4 --prompt-len 16 --gen-len 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["batch"], 1);
  EXPECT_EQ(j[1]["batch"], 4);
  EXPECT_GT(j[1]["prompt_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j[1]["gen_tokens_per_s"].get<double>(), 0);
}

// The untimed warm-up run (default) leaves nothing behind in the timed run's KV accounting: the same
// figures as with --no-warmup.
TEST(BenchEngineCli, WarmupLeavesTheTimedRunUnchanged) {
  auto with = test::run_command(bin() + " bench engine --batch 2 --prompt-len 32 --gen-len 16 --json");
  auto without = test::run_command(bin() + " bench engine --batch 2 --prompt-len 32 --gen-len 16 --json --no-warmup");
  ASSERT_EQ(with.exit_code, 0) << with.err;
  ASSERT_EQ(without.exit_code, 0) << without.err;
  auto a = nlohmann::json::parse(with.out), b = nlohmann::json::parse(without.out);
  EXPECT_DOUBLE_EQ(a[0]["kv_waste_at_peak"].get<double>(), b[0]["kv_waste_at_peak"].get<double>());
  EXPECT_DOUBLE_EQ(a[0]["kv_waste_mean"].get<double>(), b[0]["kv_waste_mean"].get<double>());
}

TEST(BenchEngineCli, KvWasteIsTheUnfilledPartOfEachSequencesLastBlock) {
  // One sequence, 128 prompt + 128 generated tokens, 16-token blocks. The prompt step stores 128
  // tokens (8 full blocks); decode step k stores token 128 + k - 1 (k = 1..126 are seen with the
  // request alive; the last step finishes it and frees its blocks). The peak (16 blocks) is first
  // reached when position 240 is stored: 241 of 256 slots hold a token.
  auto r = test::run_command(bin() + " bench engine --batch 1 --prompt-len 128 --gen-len 128 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_DOUBLE_EQ(j[0]["kv_waste_at_peak"].get<double>(), 15.0 / 256.0);
  double alloc = 0, unused = 0;
  for (int used = 128; used <= 254; ++used) {
    const int allocated = (used + 15) / 16 * 16;
    alloc += allocated;
    unused += allocated - used;
  }
  EXPECT_NEAR(j[0]["kv_waste_mean"].get<double>(), unused / alloc, 1e-12);
}
