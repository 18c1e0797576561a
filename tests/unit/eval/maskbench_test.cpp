// The MaskBench harness: Python-compatible serialization, and a bounded sample of the dev set
// (tests/data/maskbench-sample) judged with the real method, token masks included.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "eval/maskbench.h"
#include "tokenizer/tokenizer.h"

namespace tmill::eval {
namespace {

TEST(MaskBench, SerializesLikePythonJsonDumps) {
  auto v = nlohmann::ordered_json::parse(
      R"J({"a":1.0,"b":[1e-05,1e16,1e15,0.1,-0.0,123456789.125,1.5e300],"c":"é\n\u0001\u007f\"","d":null,"e":true,"f":{},"g":[],"z":7})J");
  EXPECT_EQ(python_json_dumps(v),
            "{\"a\": 1.0, \"b\": [1e-05, 1e+16, 1000000000000000.0, 0.1, -0.0, 123456789.125, 1.5e+300], "
            "\"c\": \"é\\n\\u0001\x7f\\\"\", \"d\": null, \"e\": true, \"f\": {}, \"g\": [], \"z\": 7}");
}

TEST(MaskBench, LoadsCasesWithCategories) {
  auto c = load_maskbench_case(std::string(TM_SOURCE_DIR) + "/tests/data/maskbench-sample/Github_medium---o33696.json");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->id, "Github_medium---o33696");
  EXPECT_EQ(c->category, "Github_medium");
  EXPECT_FALSE(c->tests.empty());
  auto b = load_maskbench_case(std::string(TM_SOURCE_DIR) + "/tests/data/maskbench-sample/BFCL_java_11.json");
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_EQ(b->category, "BFCL_java");
}

TEST(MaskBench, SampleOfTheDevSetIsJudgedAsMeasured) {
  const std::string dir = std::string(TM_SOURCE_DIR) + "/tests/data/maskbench-sample";
  auto tok = Tokenizer::load(std::string(TM_SOURCE_DIR) + "/tests/data/tokenizers/ggml-vocab-llama-bpe.gguf");
  ASSERT_TRUE(tok.ok()) << tok.error();
  auto files = maskbench_files(dir);
  ASSERT_TRUE(files.ok()) << files.error();
  ASSERT_EQ(files->size(), 42u);
  MaskBenchOptions opt;
  opt.threads = 2;
  opt.timeout_ms = 120000;  // generous: correctness here, speed in `grammar bench`
  MaskBenchReport rep = run_maskbench(*files, **tok, opt);
  std::map<std::string, int> n;
  std::map<std::string, std::string> status;
  for (auto& r : rep.results) {
    ++n[r.status];
    status[r.id] = r.status;
  }
  EXPECT_EQ(n["invalidation_error"], 0);
  EXPECT_EQ(n["timeout"], 0);
  EXPECT_EQ(n["passing"], 28);
  EXPECT_EQ(n["compile_error"], 13);
  EXPECT_EQ(n["validation_error"], 1);
  EXPECT_EQ(status["Github_medium---o33696"], "validation_error");  // properties out of schema order
  auto j = rep.to_json();
  EXPECT_EQ(j["schemas"], 42);
  EXPECT_EQ(j["per_schema"].size(), 42u);
  EXPECT_TRUE(j["tbm_us"].contains("p999"));
  EXPECT_GT(j["tokens"].get<int64_t>(), 1000);
}

}  // namespace
}  // namespace tmill::eval
