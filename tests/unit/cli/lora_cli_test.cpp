// LoRA on the command line: `lora dummy` writes an adapter for the bundled stories260K, `generate
// --lora FILE:SCALE` (and llama.cpp's --lora-scaled spelling) gives the greedy tokens of the model
// `lora merge` writes, and a prompts file mixes adapters and the base model in one batch.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.h"

using namespace tmill;

namespace {
std::string bin() { return test::tokenmill_binary(); }
std::string stories() { return test::source_path("models/stories260K/stories260K.gguf"); }
std::vector<int> tokens_of(const std::string& out) { return nlohmann::json::parse(out)["tokens"].get<std::vector<int>>(); }
}  // namespace

TEST(LoraCli, GenerateWithAdapterEqualsMergedModelAndPromptsFileMixes) {
  const std::string dir = test::temp_dir(), ad = dir + "/cli-lora.gguf", merged = dir + "/cli-merged.gguf";
  auto r = test::run_command(bin() + " lora dummy -m " + stories() + " -o " + ad + " --targets all --rank 4 --spread 0.2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::run_command(bin() + " lora merge -m " + stories() + " --lora " + ad + ":0.5 -o " + merged);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gen = " generate --prompt 'Once upon a time' --temperature 0 --max-tokens 24 --json";
  auto with = test::run_command(bin() + gen + " --lora " + ad + ":0.5");
  auto scaled = test::run_command(bin() + gen + " --lora-scaled " + ad + " 0.5");
  auto want = test::run_command(bin() + gen + " --model " + merged);
  auto base = test::run_command(bin() + gen);
  ASSERT_EQ(with.exit_code, 0) << with.err;
  ASSERT_EQ(scaled.exit_code, 0) << scaled.err;
  ASSERT_EQ(want.exit_code, 0) << want.err;
  EXPECT_EQ(tokens_of(with.out), tokens_of(want.out));
  EXPECT_EQ(tokens_of(scaled.out), tokens_of(want.out));
  EXPECT_NE(tokens_of(with.out), tokens_of(base.out));
  // one batch: the adapter at 0.5 by name, the base model, the adapter at the default scale 1
  const std::string prompts = dir + "/cli-lora-prompts.jsonl";
  std::ofstream(prompts) << "{\"prompt\": \"Once upon a time\", \"lora\": \"a\", \"lora_scale\": 0.5, \"max_tokens\": 24}\n"
                         << "{\"prompt\": \"Once upon a time\", \"max_tokens\": 24}\n"
                         << "{\"prompt\": \"Once upon a time\", \"lora\": \"b\", \"max_tokens\": 24}\n";
  auto mixed = test::run_command(bin() + " generate --temperature 0 --prompts-file " + prompts + " --lora a=" + ad +
                                 " --lora b=" + ad);
  ASSERT_EQ(mixed.exit_code, 0) << mixed.err;
  std::vector<std::vector<int>> lines;
  std::istringstream in(mixed.out);
  for (std::string line; std::getline(in, line);) lines.push_back(tokens_of(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], tokens_of(want.out));
  EXPECT_EQ(lines[1], tokens_of(base.out));
  EXPECT_NE(lines[2], lines[0]);
  // errors: an unknown adapter name on a line, an adapter for another model
  std::ofstream(prompts) << "{\"prompt\": \"hi\", \"lora\": \"zzz\"}\n";
  auto unknown = test::run_command(bin() + " generate --prompts-file " + prompts + " --lora a=" + ad);
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("'zzz'"), std::string::npos) << unknown.err;
}
