// llama.cpp's tokenizer conformance vectors (tests/data/tokenizers/PROVENANCE.txt): every string
// must tokenize to exactly the reference ids with add_special = false, parse_special = false.
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "tok_test_util.h"
#include "tokenizer/tokenizer.h"

namespace tmill {
namespace {

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

class GgufVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufVectors, AllStringsMatchReference) {
  const std::string name = GetParam();
  auto tok = Tokenizer::load(test::vocab_path(name));
  ASSERT_TRUE(tok.ok()) << tok.error();
  auto vectors = test::load_vectors(name);
  ASSERT_GE(vectors.size(), 40u) << "vector files not read";
  int pass = 0;
  for (const auto& [text, expect] : vectors) {
    auto got = (*tok)->encode(text, false, false);
    if (got == expect) ++pass;
    else ADD_FAILURE() << name << ": '" << text << "'\n  expected " << show(expect) << "\n  got      " << show(got);
  }
  RecordProperty("passed", pass);
  std::printf("[ %s ] %d/%zu vectors pass\n", name.c_str(), pass, vectors.size());
  EXPECT_EQ(pass, int(vectors.size()));
}

INSTANTIATE_TEST_SUITE_P(Vocabs, GgufVectors,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "bert-bge",
                                           "gemma-4"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n) if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace tmill
