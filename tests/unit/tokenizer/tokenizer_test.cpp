// Tokenizer behaviour beyond the conformance vectors: special tokens, BOS/EOS, byte fallback,
// round trips, edge cases, EOG sets, the llama2.c-converted vocabulary shape and the CLI.
#include <gtest/gtest.h>

#include <random>

#include "formats/gguf.h"
#include "tok_test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tmill {
namespace {

std::shared_ptr<const Tokenizer> load(const std::string& name) {
  static std::vector<std::pair<std::string, std::shared_ptr<const Tokenizer>>> cache;
  for (auto& [n, t] : cache) if (n == name) return t;
  auto t = Tokenizer::load(test::vocab_path(name));
  EXPECT_TRUE(t.ok()) << t.error();
  cache.emplace_back(name, *t);
  return *t;
}

std::vector<int32_t> vec(std::initializer_list<int32_t> v) { return v; }

std::vector<int32_t> reference_ids(const std::string& vocab, const std::string& text) {
  for (auto& [t, ids] : test::load_vectors(vocab)) if (t == text) return ids;
  ADD_FAILURE() << "no vector for '" << text << "'";
  return {};
}

TEST(Tokenizer, SpecialTokenParsingOnAndOff) {
  auto tok = load("qwen2");
  const std::string chat = "<|im_start|>user\nhi<|im_end|>";
  auto on = tok->encode(chat, false, true);
  ASSERT_GE(on.size(), 3u);
  EXPECT_EQ(on.front(), 151644);
  EXPECT_EQ(on.back(), 151645);
  std::vector<int32_t> middle(on.begin() + 1, on.end() - 1);
  EXPECT_EQ(middle, tok->encode("user\nhi", false, false));
  auto off = tok->encode(chat, false, false);
  for (int32_t id : off) EXPECT_LT(id, 151643) << "special token produced with parse_special=false";
  EXPECT_EQ(tok->decode(off), chat);
  EXPECT_EQ(tok->decode(on), chat);
  EXPECT_EQ(tok->decode(on, /*skip_special=*/true), "user\nhi");
  EXPECT_TRUE(tok->is_special(151644));
  EXPECT_FALSE(tok->is_special(9707));
}

TEST(Tokenizer, SpmSpecialTokensGetSpacePrefixAfterThem) {
  auto tok = load("llama-spm");
  // llama.cpp: the fragment after a special token gets the "▁" prefix again.
  auto ids = tok->encode("<s>Hello</s>Hello", false, true);
  auto hello = tok->encode("Hello", false, false);
  std::vector<int32_t> expect = {1};
  expect.insert(expect.end(), hello.begin(), hello.end());
  expect.push_back(2);
  expect.insert(expect.end(), hello.begin(), hello.end());
  EXPECT_EQ(ids, expect);
}

TEST(Tokenizer, Phi3SpecialTokensSwallowFollowingWhitespace) {
  auto tok = load("phi-3");
  auto user = tok->find_token("<|user|>");
  ASSERT_TRUE(user);
  auto ids = tok->encode("<|user|>  \n hi", false, true);
  std::vector<int32_t> expect = {*user};
  auto hi = tok->encode("hi", false, false);
  expect.insert(expect.end(), hi.begin(), hi.end());
  EXPECT_EQ(ids, expect);
}

TEST(Tokenizer, AddBosFollowsTheVocabulary) {
  EXPECT_EQ(load("llama-spm")->encode("Hello", true, false).front(), 1);  // SPM: add_bos_token = true
  EXPECT_EQ(load("llama-bpe")->encode("Hello", true, false).front(), 128000);  // llama-bpe family default
  EXPECT_EQ(load("deepseek-llm")->encode("Hello", true, false).front(), 100000);
  EXPECT_FALSE(load("qwen2")->add_bos());  // no add_bos_token key: no BOS
  EXPECT_EQ(load("qwen2")->encode("Hello", true, false), reference_ids("qwen2", "Hello"));
  EXPECT_FALSE(load("gpt-2")->add_bos());
  EXPECT_EQ(load("llama-spm")->encode("", true, false), vec({1}));
  EXPECT_EQ(load("llama-spm")->encode("", false, false), vec({}));
  EXPECT_FALSE(load("llama-spm")->add_eos());
  EXPECT_EQ(load("llama-spm")->bos_text(), "<s>");
  EXPECT_EQ(load("llama-spm")->eos_text(), "</s>");
  EXPECT_EQ(load("llama-bpe")->bos_text(), "<|begin_of_text|>");
}

TEST(Tokenizer, EndOfGenerationSets) {
  auto l3 = load("llama-bpe");
  EXPECT_TRUE(l3->is_eog(128001));  // <|end_of_text|> (EOS)
  EXPECT_TRUE(l3->is_eog(128009));  // <|eot_id|>
  EXPECT_EQ(l3->eot_id(), 128009);
  EXPECT_EQ(l3->eom_id(), -1);       // Llama 3.0 has no <|eom_id|> (128008 is reserved)
  EXPECT_FALSE(l3->is_eog(128008));
  EXPECT_FALSE(l3->is_eog(128000));
  auto q = load("qwen2");
  EXPECT_TRUE(q->is_eog(151643));
  EXPECT_TRUE(q->is_eog(151645));  // <|im_end|>
  EXPECT_FALSE(q->is_eog(151644));
  EXPECT_TRUE(load("llama-spm")->is_eog(2));
  EXPECT_TRUE(load("phi-3")->is_eog(*load("phi-3")->find_token("<|end|>")));
  EXPECT_TRUE(load("gpt-2")->is_eog(50256));
}

TEST(Tokenizer, SpmByteFallback) {
  auto tok = load("llama-spm");
  auto ids = tok->encode("\xF0\x9F\xA6\x99", false, false);  // U+1F999, not in the vocabulary
  std::vector<int32_t> expect = {*tok->find_token("▁")};
  for (const char* b : {"<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"}) expect.push_back(*tok->find_token(b));
  EXPECT_EQ(ids, expect);
  EXPECT_EQ(tok->token_to_piece(*tok->find_token("<0xF0>")), "\xF0");
  EXPECT_EQ(tok->decode(ids), "\xF0\x9F\xA6\x99");
}

TEST(Tokenizer, EdgeCasesNeverCrash) {
  const std::string invalid = "\xff\xfe abc \xc3 \xe4\xb8 \xed\xa0\x80 \xc0\xaf end\xf0";
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm"}) {
    auto tok = load(name);
    EXPECT_EQ(tok->encode("", false, true), vec({})) << name;
    for (const std::string& s : std::vector<std::string>{" ", "   ", "\n\n\t ", std::string(1, '\0'), std::string(5000, ' ')}) {
      auto ids = tok->encode(s, false, false);
      EXPECT_FALSE(ids.empty()) << name;
      EXPECT_EQ(tok->decode(ids), s) << name;
    }
    auto ids = tok->encode(invalid, true, true);
    EXPECT_FALSE(ids.empty());
    std::string clean;
    tok::sanitize_utf8(invalid, clean);
    const std::string dec = tok->decode(ids, true);
    if (tok->data().kind == tok::ModelKind::Spm) {
      // llama.cpp splits SPM symbols by the lead byte's length without validation, so a bad lead
      // byte can take the following "▁" apart into byte tokens; the valid text survives.
      EXPECT_NE(dec.find("abc"), std::string::npos) << name;
      EXPECT_NE(dec.find(" \xC0\xAF end\xF0"), std::string::npos) << name;
    } else {
      EXPECT_EQ(dec, clean) << name;  // byte-level: U+FFFD per bad byte, as llama.cpp
    }
    EXPECT_EQ(tok->decode(std::vector<int32_t>{-5, tok->n_vocab(), 1 << 30}), "");
    EXPECT_EQ(tok->token_to_piece(-1), "");
    EXPECT_EQ(tok->token_text(tok->n_vocab()), "");
  }
}

TEST(Tokenizer, RandomUnicodeRoundTrips) {
  std::mt19937 rng(42);
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm"}) {
    auto tok = load(name);
    for (int iter = 0; iter < 200; ++iter) {
      std::string text;
      int len = 1 + int(rng() % 60);
      for (int i = 0; i < len; ++i) {
        uint32_t r = rng() % 100, cp;
        if (r < 40) cp = 0x20 + rng() % 95;               // ASCII
        else if (r < 50) cp = " \n\t"[rng() % 3];
        else if (r < 65) cp = 0xA0 + rng() % 0x500;       // Latin/Greek/Cyrillic
        else if (r < 80) cp = 0x4E00 + rng() % 0x5000;    // CJK
        else if (r < 90) cp = 0x1F300 + rng() % 0x300;    // emoji
        else cp = 0x10000 + rng() % 0x30000;              // supplementary planes
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        tok::append_utf8(text, cp);
      }
      auto ids = tok->encode(text, false, false);
      ASSERT_EQ(tok->decode(ids), text) << name << " iteration " << iter;
    }
  }
}

TEST(Tokenizer, LookupsAndPieces) {
  auto tok = load("gpt-2");
  EXPECT_EQ(tok->n_vocab(), 50257);
  EXPECT_EQ(tok->find_token("Hello"), 15496);
  EXPECT_FALSE(tok->find_token("no such token here").has_value());
  EXPECT_EQ(tok->token_text(220), "Ġ");
  EXPECT_EQ(tok->token_to_piece(220), " ");
  EXPECT_EQ(tok->token_to_piece(50256), "<|endoftext|>");
  EXPECT_EQ(tok->piece(50256, true), "");
  EXPECT_FALSE(tok->chat_template().has_value());
  EXPECT_TRUE(load("phi-3")->chat_template().has_value());
}

// token_bytes: what structured output sees of each token (grammar::Vocabulary).
TEST(Tokenizer, TokenBytesForGrammars) {
  auto gpt2 = load("gpt-2");
  EXPECT_EQ(gpt2->token_bytes(220), " ");           // byte-level "Ġ" -> space
  EXPECT_EQ(gpt2->token_bytes(15496), "Hello");
  EXPECT_EQ(gpt2->token_bytes(50256), "");          // <|endoftext|>: control, never grammar text
  EXPECT_EQ(gpt2->token_bytes(-1), "");
  EXPECT_EQ(gpt2->token_bytes(gpt2->n_vocab()), "");
  auto all = gpt2->token_bytes_all();
  ASSERT_EQ(all.size(), size_t(gpt2->n_vocab()));
  EXPECT_EQ(all[220], " ");
  EXPECT_EQ(all[50256], "");
  auto qwen = load("qwen2");
  EXPECT_EQ(qwen->token_bytes(151644), "");         // <|im_start|>
  EXPECT_EQ(qwen->token_bytes(9707), qwen->decode(vec({9707})));
  auto spm = load("llama-spm");
  const auto ids = spm->encode("a b\xf0\x9f\xa6\x99", false, false);  // the emoji: byte tokens
  std::string joined;
  for (int32_t id : ids) joined += spm->token_bytes(id);  // "▁" -> space, <0xXX> -> the byte
  EXPECT_EQ(joined, spm->decode_continuation(ids));
  EXPECT_NE(joined.find(" b\xf0\x9f\xa6\x99"), std::string::npos);
}

// The shape our llama2.c converter writes for stories260K's tok512: model "llama", <unk> <s> </s>,
// 256 byte tokens, then pieces with "▁" for space and llama2.c scores.
TEST(Tokenizer, Llama2cVocabShape) {
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    toks.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    scores.push_back(0);
    types.push_back(6);
  }
  for (auto [piece, score] : std::vector<std::pair<const char*, float>>{
           {"▁", -1}, {"e", -2}, {"h", -3}, {"t", -4}, {"▁t", -5}, {"he", -6}, {"▁the", -7}, {"▁th", -8}, {"r", -9}}) {
    toks.push_back(piece);
    scores.push_back(score);
    types.push_back(1);
  }
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(toks));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok());
  auto f = GgufFile::parse(bytes->data(), bytes->size());
  ASSERT_TRUE(f.ok()) << f.error();
  auto tok = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok.ok()) << tok.error();
  const int32_t sp = 259, e = 260, h = 261, t = 262, he = 264, sp_the = 265, sp_th = 266;
  (void)sp_th;
  // "▁the": ▁+t (score -5) beats h+e (-6); then ▁t+he -> "▁the"? not a token; "▁th" needs ▁t+h (-8).
  // Scores: ▁t(-5) first, then he(-6), then ▁t+he = "▁the" (-7). Result: one token.
  EXPECT_EQ((*tok)->encode("the", true, false), vec({1, sp_the}));
  EXPECT_EQ((*tok)->encode("het", false, false), vec({sp, he, t}));
  // "x" is not a piece: byte fallback to <0x78>; "é" -> two byte tokens.
  EXPECT_EQ((*tok)->encode("x", false, false), vec({sp, 3 + 'x'}));
  EXPECT_EQ((*tok)->encode("\xC3\xA9", false, false), vec({sp, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ((*tok)->decode(vec({1, sp_the, sp, e, h}), true), "the eh");
  EXPECT_EQ((*tok)->decode(vec({1, sp_the, sp, e, h})), "<s> the eh");  // "<s>" starts the text
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->unk_id(), 0);
}

TEST(Tokenizer, Stories260KModelFile) {
  const std::string path = test::source_path("models/stories260K/stories260K.gguf");
  auto tok = Tokenizer::load(path);
  ASSERT_TRUE(tok.ok()) << tok.error();
  EXPECT_EQ((*tok)->n_vocab(), 512);
  const std::string text = test::slurp_file(test::source_path("models/stories260K/expected_greedy_200.txt"));
  ASSERT_FALSE(text.empty());
  auto ids = (*tok)->encode(text, true, false);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_LT(ids.size(), text.size() / 2);  // real merges happen
  EXPECT_EQ((*tok)->decode(ids, true), text);
}

TEST(TokenizeCli, TokenizeAndDetokenize) {
  const std::string bin = test::cli_binary();
  const std::string gguf = test::vocab_path("qwen2");
  auto r = test::run_command(bin + " tokenize --model '" + gguf + "' --text 'Hello world'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ids = reference_ids("qwen2", "Hello world");
  std::string expect = "[";
  for (size_t i = 0; i < ids.size(); ++i) expect += (i ? ", " : "") + std::to_string(ids[i]);
  expect += "]\n";
  EXPECT_EQ(r.out, expect);
  r = test::run_command(bin + " detokenize --model '" + gguf + "' --ids " + std::to_string(ids[0]) + "," +
                        std::to_string(ids[1]));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello world");  // no trailing newline
  // HF folder, --file, --add-special and --parse-special.
  const std::string file = test::temp_dir() + "/cli-input.txt";
  { std::ofstream(file) << "<|begin_of_text|>Hi"; }
  r = test::run_command(bin + " tokenize -m '" + test::hf_dir("llama3") + "' --file '" + file + "' --add-special --parse-special");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[128000, 128000, 13347]\n");
  r = test::run_command(bin + " tokenize --model '" + gguf + "'");
  EXPECT_NE(r.exit_code, 0);
  r = test::run_command(bin + " detokenize --model '" + gguf + "' --ids 1,x");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace tmill
