// The `tokenmill eval ...` commands as users run them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "convert/imatrix_file.h"
#include "eval_models.h"
#include "model/model.h"
#include "model/reference.h"
#include "test_support.h"

using namespace tmill;
using nlohmann::json;

namespace {
std::string bin() { return test::tokenmill_binary(); }
std::string story() { return test::story_text_path(); }
std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}
json run_json(const std::string& args) {
  auto r = test::run_command(bin() + " " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}
}  // namespace

TEST(EvalCli, PerplexityDefaultModel) {
  json j = run_json("eval perplexity --text " + story() + " --ctx 128 --threads 2");
  EXPECT_EQ(j["ctx"], 128);
  EXPECT_EQ(j["kv_cache_dtype"], "f32");  // auto on an F32 model
  EXPECT_EQ(j["tokens"], j["chunks"].get<int>() * 63);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_LT(j["ppl"].get<double>(), 20.0);
  // the text form prints the same value
  auto r = test::run_command(bin() + " eval perplexity --text " + story() + " --ctx 128 --threads 2");
  ASSERT_EQ(r.exit_code, 0);
  char buf[64];
  std::snprintf(buf, sizeof buf, "PPL = %.4f", j["ppl"].get<double>());
  EXPECT_NE(r.out.find(buf), std::string::npos) << r.out;
}

TEST(EvalCli, PerplexityErrors) {
  auto r = test::run_command(bin() + " eval perplexity --text " + story() + " --ctx 100000 --threads 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("fewer than one chunk"), std::string::npos) << r.err;
  r = test::run_command(bin() + " eval perplexity --text /nonexistent.txt");
  EXPECT_EQ(r.exit_code, 1);
  r = test::run_command(bin() + " eval perplexity --text " + story() + " --kv-cache-dtype fp4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unsupported KV cache dtype"), std::string::npos);
}

TEST(EvalCli, CompareJsonKeysSelfAndKvTypes) {
  const std::string m = test::stories_path();
  json self = run_json("eval compare --reference " + m + " --model " + m + " --text " + story() + " --ctx 128 --threads 2");
  for (const char* k : {"kld", "top1_agreement", "ppl_reference", "ppl_model", "tokens"}) EXPECT_TRUE(self.contains(k)) << k;
  for (const char* k : {"mean", "p99", "max"}) EXPECT_TRUE(self["kld"].contains(k)) << k;
  EXPECT_EQ(self["kld"]["mean"], 0.0);
  EXPECT_EQ(self["kld"]["max"], 0.0);
  EXPECT_EQ(self["top1_agreement"], 1.0);
  EXPECT_EQ(self["ppl_reference"], self["ppl_model"]);
  // same model, int8 KV against f32 KV
  json kv = run_json("eval compare --reference " + m + " --model " + m + " --text " + story() +
                     " --ctx 128 --threads 2 --kv-cache-dtype int8");
  EXPECT_EQ(kv["kv_cache_dtype"], "int8");
  EXPECT_EQ(kv["reference_kv_cache_dtype"], "f32");
  EXPECT_GT(kv["kld"]["mean"].get<double>(), 0.0);
  EXPECT_LT(kv["kld"]["mean"].get<double>(), 0.01);
  EXPECT_EQ(kv["tokens"], self["tokens"]);
  // vLLM's fp8 is E4M3, and the output says so
  json fp8 = run_json("eval compare --reference " + m + " --model " + m + " --text " + story() +
                      " --ctx 128 --threads 2 --kv-cache-dtype fp8");
  EXPECT_EQ(fp8["kv_cache_dtype"], "fp8_e4m3");
  EXPECT_GT(fp8["kld"]["mean"].get<double>(), kv["kld"]["mean"].get<double>());  // stories260K: 0.0103 vs 0.00186
  EXPECT_LT(fp8["kld"]["mean"].get<double>(), 0.05);
  // perplexity of the reference equals `eval perplexity`
  json p = run_json("eval perplexity --text " + story() + " --ctx 128 --threads 2");
  EXPECT_NEAR(self["ppl_reference"].get<double>(), p["ppl"].get<double>(), 1e-9);
}

TEST(EvalCli, CompareRefusesDifferentVocabularies) {
  ModelShape s = *find_shape("tiny-llama");
  s.name = "tiny-llama-v700";
  s.n_vocab = 700;
  auto r = test::run_command(bin() + " eval compare --reference " + test::stories_path() + " --model " +
                             test::dummy_model(s) + " --text " + story());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("different vocabularies"), std::string::npos) << r.err;
  // same size (512), different tokens
  r = test::run_command(bin() + " eval compare --reference " + test::stories_path() + " --model " +
                        test::dummy_model("tiny-llama") + " --text " + story());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("different tokens"), std::string::npos) << r.err;
}

// --reference-logits: llama-perplexity's --kl-divergence-base file as the reference. tokenmill writes one
// (eval perplexity --kl-divergence-base) and reads it back; tests/data/llamacpp-kld/ holds one that
// llama.cpp itself wrote (KldGoldenFromLlamaCpp below).
TEST(EvalCli, CompareAgainstReferenceLogitsFile) {
  const std::string m = test::stories_path();
  const std::string base = test::temp_dir() + "/stories-kld-base.bin";
  json p = run_json("eval perplexity --model " + m + " --text " + story() + " --ctx 64 --threads 2 --kl-divergence-base " + base);
  json self = run_json("eval compare --reference-logits " + base + " --model " + m + " --threads 2");
  EXPECT_EQ(self["reference_logits"], base);
  EXPECT_EQ(self["ctx"], 64);  // from the file
  EXPECT_EQ(self["tokens"], p["tokens"]);
  EXPECT_EQ(self["chunks"], p["chunks"]);
  EXPECT_LT(self["kld"]["mean"].get<double>(), 1e-5);  // 16-bit rounding only
  EXPECT_GE(self["top1_agreement"].get<double>(), 0.995);
  EXPECT_NEAR(self["ppl_reference"].get<double>(), p["ppl"].get<double>(), 1e-3 * p["ppl"].get<double>());
  EXPECT_NEAR(self["ppl_model"].get<double>(), p["ppl"].get<double>(), 1e-9 * p["ppl"].get<double>());
  // --chunks limits the chunks as llama-perplexity's does
  json two = run_json("eval compare --reference-logits " + base + " --model " + m + " --threads 2 --chunks 2 --ctx 64");
  EXPECT_EQ(two["chunks"], 2);
  EXPECT_EQ(two["tokens"], 2 * 31);
  // an int8 KV cache against the file: a real, small divergence
  json kv = run_json("eval compare --reference-logits " + base + " --model " + m + " --threads 2 --kv-cache-dtype int8");
  EXPECT_GT(kv["kld"]["mean"].get<double>(), self["kld"]["mean"].get<double>());
  EXPECT_LT(kv["kld"]["mean"].get<double>(), 0.01);

  // errors: --ctx that differs from the file, both or neither reference, --text with the file, another vocabulary
  auto r = test::run_command(bin() + " eval compare --reference-logits " + base + " --model " + m + " --ctx 128");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--ctx 128 differs from the context of"), std::string::npos) << r.err;
  r = test::run_command(bin() + " eval compare --reference-logits " + base + " --reference " + m + " --model " + m +
                        " --text " + story());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exactly one of --reference"), std::string::npos) << r.err;
  r = test::run_command(bin() + " eval compare --model " + m + " --text " + story());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exactly one of --reference"), std::string::npos) << r.err;
  r = test::run_command(bin() + " eval compare --reference-logits " + base + " --model " + m + " --text " + story());
  EXPECT_EQ(r.exit_code, 2);
  ModelShape v700 = *find_shape("tiny-llama");
  v700.name = "tiny-llama-v700";
  v700.n_vocab = 700;
  r = test::run_command(bin() + " eval compare --reference-logits " + base + " --model " + test::dummy_model(v700));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs the same vocabulary"), std::string::npos) << r.err;
  r = test::run_command(bin() + " eval compare --reference-logits " + story() + " --model " + m);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a llama.cpp KL-divergence base file"), std::string::npos) << r.err;
}

// A base file written by llama.cpp's own llama-perplexity (tests/data/llamacpp-kld/PROVENANCE.txt):
// tokenmill reads the real format and computes what llama.cpp computed on the same file.
TEST(EvalCli, KldGoldenFromLlamaCpp) {
  const std::string golden = test::source_path("tests/data/llamacpp-kld/stories260K-c128.kld");
  json j = run_json("eval compare --reference-logits " + golden + " --model " + test::stories_path() + " --threads 2");
  EXPECT_EQ(j["ctx"], 128);
  EXPECT_EQ(j["chunks"], 3);
  EXPECT_EQ(j["tokens"], 3 * 63);
  EXPECT_LT(j["kld"]["mean"].get<double>(), 1e-4);  // issue 19's bar (measured 5e-6: the 16-bit rows' floor)
  EXPECT_GE(j["top1_agreement"].get<double>(), 0.995);
  EXPECT_NEAR(j["ppl_reference"].get<double>(), 3.4193, 5e-4);  // llama-perplexity's "Final estimate"
  EXPECT_NEAR(j["ppl_model"].get<double>(), j["ppl_reference"].get<double>(), 2e-3);
  // a quantized model against llama.cpp's F32 logits: a real divergence, ordered as expected
  const std::string q8 = test::temp_dir() + "/stories-q8-golden.gguf";
  const std::string q4 = test::temp_dir() + "/stories-q4-golden.gguf";
  ASSERT_EQ(test::run_command(bin() + " quantize " + test::stories_path() + " " + q8 + " --type Q8_0 -q").exit_code, 0);
  ASSERT_EQ(test::run_command(bin() + " quantize " + test::stories_path() + " " + q4 + " --type Q4_0 -q").exit_code, 0);
  const double k8 = run_json("eval compare --reference-logits " + golden + " --model " + q8 + " --threads 2")["kld"]["mean"];
  const double k4 = run_json("eval compare --reference-logits " + golden + " --model " + q4 + " --threads 2")["kld"]["mean"];
  EXPECT_GT(k8, j["kld"]["mean"].get<double>());
  EXPECT_GT(k4, 10 * k8);
}

TEST(EvalCli, ImatrixThenQuantizeWithIt) {
  const std::string dir = test::temp_dir();
  const std::string model = test::dummy_model("tiny-qwen2");
  auto r = test::run_command(bin() + " eval imatrix --model " + model + " --text " +
                             test::source_path("tests/data/eval/calibration.txt") + " -o " + dir +
                             "/im.gguf --ctx 64 --chunks 5 --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("14 weight matrices, 5 chunk(s) of 64 tokens"), std::string::npos) << r.out;
  auto im = load_imatrix(dir + "/im.gguf");
  ASSERT_TRUE(im.ok()) << im.error();
  EXPECT_EQ(im->chunk_count, 5);
  EXPECT_EQ(im->entries.at("blk.1.ffn_down.weight").counts, std::vector<float>{320.0f});
  r = test::run_command(bin() + " quantize " + model + " " + dir + "/q.gguf --type Q4_0 --pure -q --imatrix " + dir +
                        "/im.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("imatrix"), std::string::npos);
}

TEST(EvalCli, TasksReports) {
  const std::string dir = test::temp_dir();
  const std::string tasks = test::source_path("tests/data/eval/stories_tasks.jsonl");
  auto r = test::run_command(bin() + " eval tasks --tasks " + tasks + " --threads 2 --json --markdown " + dir +
                             "/r.md --report " + dir + "/r.html");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["models"].size(), 1u);
  EXPECT_EQ(j["models"][0]["passed"], 6);
  EXPECT_EQ(j["models"][0]["cases"][0]["answer"], ", there was a little girl named Lily");
  EXPECT_NE(slurp(dir + "/r.md").find("| stories260K | 54.5% | 6/11 |"), std::string::npos);
  EXPECT_NE(slurp(dir + "/r.html").find("<svg"), std::string::npos);
  // two models (the same file twice: no differences), CI gate
  const std::string m = test::stories_path();
  r = test::run_command(bin() + " eval tasks --model " + m + " --model " + m + " --tasks " + tasks +
                        " --threads 2 --min-accuracy 50");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| id | metric | expected | stories260K (stories260K.gguf) #1 | stories260K (stories260K.gguf) #2 | "
                      "differs |"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("≠"), std::string::npos);
  r = test::run_command(bin() + " eval tasks --tasks " + tasks + " --threads 2 --min-accuracy 60");
  EXPECT_EQ(r.exit_code, 3);
  // a broken task file names the line
  std::ofstream(dir + "/bad.jsonl") << R"({"prompt": "x", "expected": "y", "metric": "exact"})" "\n" << "{oops\n";
  r = test::run_command(bin() + " eval tasks --tasks " + dir + "/bad.jsonl");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.jsonl: line 2: invalid JSON"), std::string::npos) << r.err;
}

TEST(EvalCli, ExampleTaskFilesParse) {
  // Written for real chat models; here only checked to load (stories260K cannot answer them).
  for (const char* f : {"faq.jsonl", "extraction.jsonl", "multiple_choice.jsonl"}) {
    auto r = test::run_command(bin() + " eval tasks --tasks " + test::source_path(std::string("examples/tasks/") + f) +
                               " --threads 2 --max-tokens 4 --json");
    EXPECT_EQ(r.exit_code, 0) << f << ": " << r.err;
  }
}

// `eval logits` prints the batched forward's next-token logits at every position; on the bundled F32
// model (f32 KV cache) they equal the scalar reference forward's.
TEST(EvalCli, LogitsMatchTheReferenceForward) {
  const std::string model = test::source_path("models/stories260K/stories260K.gguf");
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432, 383};
  auto r = test::run_command(bin() + " eval logits --model " + model + " --tokens 1,403,407,261,378,432,383 " +
                             "--kv-cache-dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto m = Model::load(model);
  ASSERT_TRUE(m.ok()) << m.error();
  ReferenceForward ref(*m, 16);
  std::istringstream lines(r.out);
  std::string line;
  size_t pos = 0;
  for (; std::getline(lines, line); ++pos) {
    ASSERT_LT(pos, ids.size());
    const json j = json::parse(line);
    EXPECT_EQ(j["pos"], pos);
    EXPECT_EQ(j["token"], ids[pos]);
    const auto got = j["logits"].get<std::vector<float>>();
    const std::vector<float>& want = ref.forward(ids[pos], static_cast<int64_t>(pos));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::abs(want[i]))) << pos << " " << i;
  }
  EXPECT_EQ(pos, ids.size());
  // --top 2: the two largest, in order
  r = test::run_command(bin() + " eval logits --model " + model + " --tokens 1 --top 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json top = json::parse(r.out)["top"];
  ASSERT_EQ(top.size(), 2u);
  EXPECT_GE(top[0][1].get<float>(), top[1][1].get<float>());
  // bad input: a token outside the vocabulary, both or neither of --tokens/--text
  EXPECT_NE(test::run_command(bin() + " eval logits --tokens 1,99999").exit_code, 0);
  EXPECT_NE(test::run_command(bin() + " eval logits").exit_code, 0);
  EXPECT_NE(test::run_command(bin() + " eval logits --tokens 1 --text x").exit_code, 0);
}
