// HF tokenizer folder -> GGUF tokenizer metadata (hf_tokenizer_to_gguf): a vocab-only GGUF written
// from the Qwen3 and Llama 3 folders tokenizes like the folder (the GGUF twins' vectors, specials,
// BOS handling, chat template).
#include <gtest/gtest.h>

#include "../tokenizer/tok_test_util.h"
#include "convert/hf_tokenizer.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tmill {
namespace {

class HfTwins : public ::testing::TestWithParam<test::HfTwin> {};

TEST_P(HfTwins, ConvertedToGgufTokenizesIdentically) {
  const test::HfTwin t = GetParam();
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  Status st = hf_tokenizer_to_gguf(test::hf_dir(t.hf), w);
  ASSERT_TRUE(st.ok()) << st.error();
  const std::string path = test::temp_dir() + "/" + t.hf + "-vocab.gguf";
  ASSERT_TRUE(w.write(path).ok());
  auto gguf = GgufFile::open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.error();
  EXPECT_EQ(gguf->get_string("tokenizer.ggml.model").value_or(""), "gpt2");
  EXPECT_EQ(gguf->get_string("tokenizer.ggml.pre").value_or(""), t.pre);
  auto conv = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(conv.ok()) << conv.error();
  auto hf = Tokenizer::load(test::hf_dir(t.hf));
  ASSERT_TRUE(hf.ok());
  EXPECT_EQ(test::count_passing(**conv, t.gguf), 46);
  EXPECT_EQ((*conv)->n_vocab(), (*hf)->n_vocab());
  EXPECT_EQ((*conv)->eos_id(), (*hf)->eos_id());
  EXPECT_EQ((*conv)->add_bos(), (*hf)->add_bos());
  EXPECT_EQ((*conv)->chat_template(), (*hf)->chat_template());
  EXPECT_EQ((*conv)->eog_ids(), (*hf)->eog_ids());
  // Special-token parsing and BOS handling agree too.
  const std::string chat = "<|im_start|>user\nHi there<|im_end|>\n<|eot_id|><|begin_of_text|> x";
  for (bool add : {false, true})
    for (bool parse : {false, true}) EXPECT_EQ((*conv)->encode(chat, add, parse), (*hf)->encode(chat, add, parse));
}

INSTANTIATE_TEST_SUITE_P(Folders, HfTwins, ::testing::ValuesIn(test::kHfTwins),
                         [](const auto& info) { return std::string(info.param.hf); });

}  // namespace
}  // namespace tmill
