// Hugging Face tokenizer.json folders: the Qwen3 and Llama 3 files must give the ids of their
// GGUF twins (qwen2 and llama-bpe vectors). Their conversion to GGUF metadata is tested in
// tests/unit/convert/hf_tokenizer_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "tok_test_util.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/normalize.h"
#include "tokenizer/tokenizer.h"

namespace tmill {
namespace {

class HfTwins : public ::testing::TestWithParam<test::HfTwin> {};

TEST_P(HfTwins, HfFolderPassesTheGgufVectors) {
  const test::HfTwin t = GetParam();
  auto tok = Tokenizer::load(test::hf_dir(t.hf));
  ASSERT_TRUE(tok.ok()) << tok.error();
  EXPECT_EQ((*tok)->data().pre, t.pre);  // the detected GGUF pre-tokenizer family
  int pass = test::count_passing(**tok, t.gguf);
  std::printf("[ hf/%s ] %d/46 %s vectors pass\n", t.hf, pass, t.gguf);
  EXPECT_EQ(pass, 46);
}

INSTANTIATE_TEST_SUITE_P(Folders, HfTwins, ::testing::ValuesIn(test::kHfTwins),
                         [](const auto& info) { return std::string(info.param.hf); });

TEST(HfTokenizer, Qwen3SpecialsAndConfig) {
  auto tok = Tokenizer::load(test::hf_dir("qwen3"));
  ASSERT_TRUE(tok.ok()) << tok.error();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.n_vocab(), 151669);
  EXPECT_EQ(t.eos_id(), 151645);  // <|im_end|> per tokenizer_config.json
  EXPECT_EQ(t.pad_id(), 151643);
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_FALSE(t.add_bos());
  EXPECT_TRUE(t.is_eog(151643));  // <|endoftext|>
  EXPECT_TRUE(t.is_eog(151645));
  EXPECT_FALSE(t.is_eog(151644));
  ASSERT_TRUE(t.chat_template().has_value());
  EXPECT_NE(t.chat_template()->find("<|im_start|>"), std::string::npos);
  // <think> is a non-special added token: matched even without parse_special.
  EXPECT_EQ(t.encode("<think>", false, false), std::vector<int32_t>{151667});
  EXPECT_EQ(t.encode("<|im_start|>", false, true), std::vector<int32_t>{151644});
  EXPECT_GT(t.encode("<|im_start|>", false, false).size(), 1u);
  // NFC normalizer: a decomposed "é" (e + U+0301) tokenizes like the composed one.
  if (!tok::nfc_available()) GTEST_SKIP() << "built without ICU: no NFC";
  EXPECT_EQ(t.encode("caf\x65\xCC\x81", false, false), t.encode("caf\xC3\xA9", false, false));
}

TEST(HfTokenizer, Llama3BosFromFamily) {
  auto tok = Tokenizer::load(test::hf_dir("llama3"));
  ASSERT_TRUE(tok.ok()) << tok.error();
  EXPECT_EQ((*tok)->bos_id(), 128000);
  EXPECT_EQ((*tok)->eos_id(), 128001);
  EXPECT_TRUE((*tok)->add_bos());
  auto ids = (*tok)->encode("Hello", true, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_TRUE((*tok)->is_eog(128009));  // <|eot_id|>
  EXPECT_EQ((*tok)->eot_id(), 128009);
}

TEST(HfTokenizer, RejectsBrokenAndUnsupportedFiles) {
  EXPECT_FALSE(tok::vocab_from_hf_json("", "").ok());
  EXPECT_FALSE(tok::vocab_from_hf_json("{\"model\": 3}", "").ok());
  EXPECT_FALSE(tok::vocab_from_hf_json("[1,2]", "").ok());
  auto r = tok::vocab_from_hf_json(R"({"model":{"type":"WordPiece","vocab":{"a":0}}})", "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("WordPiece"), std::string::npos);
  EXPECT_FALSE(Tokenizer::load(test::temp_dir() + "/no-such-dir-or-file").ok());
}

// A minimal SentencePiece-style BPE folder (Mistral/Llama-2 tokenizer.json shape): Metaspace
// pre-tokenizer, byte fallback, merges over raw UTF-8.
TEST(HfTokenizer, MetaspaceByteFallbackBpe) {
  const std::string json = R"({
    "added_tokens": [{"id":0,"content":"<unk>","special":true},{"id":1,"content":"<s>","special":true},
                     {"id":2,"content":"</s>","special":true}],
    "normalizer": null,
    "pre_tokenizer": {"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false},
    "decoder": {"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false},
    "model": {"type":"BPE","byte_fallback":true,"unk_token":"<unk>",
      "vocab": {"<unk>":0,"<s>":1,"</s>":2,"<0xE4>":3,"<0xB8>":4,"<0xAD>":5,"▁":6,"h":7,"i":8,"▁h":9,"▁hi":10,
                "▁▁":11},
      "merges": ["▁ h", "▁h i", "▁ ▁"]}})";
  const std::string cfg = R"({"bos_token":"<s>","eos_token":"</s>","add_bos_token":true})";
  auto v = tok::vocab_from_hf_json(json, cfg);
  ASSERT_TRUE(v.ok()) << v.error();
  auto tok = Tokenizer::from_data(std::move(*v));
  ASSERT_TRUE(tok.ok()) << tok.error();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.encode("hi", false, false), (std::vector<int32_t>{10}));
  EXPECT_EQ(t.encode("hi", true, false), (std::vector<int32_t>{1, 10}));
  EXPECT_EQ(t.encode("hi hi", false, false), (std::vector<int32_t>{10, 10}));
  // "中" is not in the vocabulary: its three UTF-8 bytes become <0xNN> tokens.
  EXPECT_EQ(t.encode("hi中", false, false), (std::vector<int32_t>{10, 3, 4, 5}));
  // prepend_scheme "first": no extra "▁" after a special token; a leading space is not doubled.
  EXPECT_EQ(t.encode("<s>hi", false, true), (std::vector<int32_t>{1, 7, 8}));
  EXPECT_EQ(t.encode(" hi", false, false), (std::vector<int32_t>{10}));
  EXPECT_EQ(t.decode(t.encode("hi hi中", true, false), true), "hi hi中");
}

// Gemma's tokenizer.json: a Replace(" " -> "▁") normalizer, then a Split at " " (MergedWithPrevious)
// that finds nothing left to split; byte fallback; no prefix "▁" (add_dummy_prefix off).
TEST(HfTokenizer, GemmaReplaceThenNoOpSplit) {
  const std::string json = R"({
    "added_tokens": [{"id":0,"content":"<pad>","special":true},{"id":1,"content":"<eos>","special":true},
                     {"id":2,"content":"<bos>","special":true},{"id":3,"content":"<unk>","special":true}],
    "normalizer": {"type":"Replace","pattern":{"String":" "},"content":"▁"},
    "pre_tokenizer": {"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false},
    "decoder": {"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},
                {"type":"ByteFallback"},{"type":"Fuse"}]},
    "model": {"type":"BPE","byte_fallback":true,"unk_token":"<unk>","fuse_unk":true,
      "vocab": {"<pad>":0,"<eos>":1,"<bos>":2,"<unk>":3,"<0xE4>":4,"<0xB8>":5,"<0xAD>":6,"▁":7,"h":8,"i":9,
                "hi":10,"▁hi":11,"▁▁":12},
      "merges": ["h i", "▁ hi", "▁ ▁"]}})";
  const std::string cfg = R"({"bos_token":"<bos>","eos_token":"<eos>","add_bos_token":true})";
  auto v = tok::vocab_from_hf_json(json, cfg);
  ASSERT_TRUE(v.ok()) << v.error();
  auto tok = Tokenizer::from_data(std::move(*v));
  ASSERT_TRUE(tok.ok()) << tok.error();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.encode("hi", false, false), (std::vector<int32_t>{10}));  // no "▁" put in front
  EXPECT_EQ(t.encode("hi hi", true, false), (std::vector<int32_t>{2, 10, 11}));
  EXPECT_EQ(t.encode("hi  hi", false, false), (std::vector<int32_t>{10, 7, 11}));  // the spaces stay in one piece
  EXPECT_EQ(t.encode("hi中", false, false), (std::vector<int32_t>{10, 4, 5, 6}));
  EXPECT_EQ(t.decode(t.encode("hi  hi中", true, false), true), "hi  hi中");
  // the same Split without the normalizer before it would split: still refused
  nlohmann::json split_only = nlohmann::json::parse(json);
  split_only["normalizer"] = nullptr;
  auto bad = tok::vocab_from_hf_json(split_only.dump(), cfg);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("MergedWithPrevious"), std::string::npos) << bad.error();
}

// The chat template saved apart (gpt-oss ships chat_template.jinja only): read as llama.cpp's
// SpecialVocab does, tokenizer_config.json's first, then chat_template.jinja, then chat_template.json.
TEST(HfTokenizer, ChatTemplateFiles) {
  const std::string dir = test::temp_dir() + "/hf-template";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir + "/" + name) << text; };
  write("tokenizer.json", R"({"added_tokens": [{"id":0,"content":"<unk>","special":true}],
    "pre_tokenizer": {"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false},
    "model": {"type":"BPE","byte_fallback":true,"unk_token":"<unk>","vocab": {"<unk>":0,"▁":1,"h":2,"▁h":3},
              "merges": ["▁ h"]}})");
  auto template_of = [&]() -> std::optional<std::string> {
    auto tok = Tokenizer::load(dir);
    EXPECT_TRUE(tok.ok()) << tok.error();
    return tok.ok() ? (*tok)->chat_template() : std::nullopt;
  };
  nlohmann::json config = {{"unk_token", "<unk>"}};
  write("tokenizer_config.json", config.dump());
  EXPECT_FALSE(template_of().has_value());
  write("chat_template.json", nlohmann::json{{"chat_template", "from json"}}.dump());
  EXPECT_EQ(template_of(), "from json");
  write("chat_template.jinja", "{{ messages[0]['content'] }}");
  EXPECT_EQ(template_of(), "{{ messages[0]['content'] }}");
  config["chat_template"] = "from tokenizer_config";
  write("tokenizer_config.json", config.dump());
  EXPECT_EQ(template_of(), "from tokenizer_config");
}

}  // namespace
}  // namespace tmill
