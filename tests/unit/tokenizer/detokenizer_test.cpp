// StreamingDetokenizer: UTF-8 holding, stop strings across token boundaries, the leading-space
// rule, and "streamed pieces concatenate to the full decode".
#include <gtest/gtest.h>

#include <random>

#include "tok_test_util.h"
#include "tokenizer/detokenizer.h"
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

std::string sanitized(std::string_view s) {
  std::string out;
  tok::sanitize_utf8(s, out);
  return out;
}

struct Streamed {
  std::vector<std::string> pieces;
  std::string all;
};
Streamed stream(StreamingDetokenizer& d, const std::vector<int32_t>& ids) {
  Streamed s;
  for (int32_t id : ids) {
    s.pieces.push_back(d.push(id));
    s.all += s.pieces.back();
    EXPECT_TRUE(is_valid_utf8_for_test(s.pieces.back())) << "piece is not valid UTF-8";
    if (d.stopped()) return s;
  }
  s.pieces.push_back(d.finish());
  s.all += s.pieces.back();
  return s;
}

TEST(StreamingDetokenizer, HoldsByteFallbackCharacterUntilComplete) {
  auto tok = load("llama-spm");
  // U+1F999 is not in the Llama 2 vocabulary: "▁" + four <0xNN> byte tokens.
  auto ids = tok->encode("\xF0\x9F\xA6\x99", false, false);
  ASSERT_EQ(ids.size(), 5u);
  StreamingDetokenizer d(tok, std::vector<int32_t>{tok->bos_id()}, {});
  EXPECT_EQ(d.push(ids[0]), "");  // "▁" at the start of the text: stripped
  EXPECT_EQ(d.push(ids[1]), "");  // F0
  EXPECT_EQ(d.push(ids[2]), "");  // 9F
  EXPECT_EQ(d.push(ids[3]), "");  // A6
  EXPECT_EQ(d.push(ids[4]), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(d.finish(), "");
}

TEST(StreamingDetokenizer, HoldsByteLevelPiecesOfOneCharacter) {
  auto tok = load("qwen2");
  const std::string rare = "\xF0\xA0\x80\x80";  // U+20000 (CJK Ext. B): several byte-level tokens
  auto ids = tok->encode(rare, false, false);
  ASSERT_GE(ids.size(), 2u);
  StreamingDetokenizer d(tok, {});
  for (size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(d.push(ids[i]), "") << i;
  EXPECT_EQ(d.push(ids.back()), rare);
}

TEST(StreamingDetokenizer, FinishTurnsIncompleteBytesIntoReplacementCharacters) {
  auto tok = load("llama-spm");
  auto e4 = tok->find_token("<0xE4>"), b8 = tok->find_token("<0xB8>"), a = tok->find_token("A");
  ASSERT_TRUE(e4 && b8 && a);
  StreamingDetokenizer d(tok, {});
  EXPECT_EQ(d.push(*e4), "");
  EXPECT_EQ(d.push(*b8), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // A byte that can never start a character is replaced at once.
  StreamingDetokenizer d2(tok, {});
  EXPECT_EQ(d2.push(*e4), "");
  EXPECT_EQ(d2.push(*a), "\xEF\xBF\xBD" "A");
}

TEST(StreamingDetokenizer, StopStringAcrossTokens) {
  auto tok = load("gpt-2");
  const std::string text = "Hello world, the answer is here. User: next question";
  auto ids = tok->encode(text, false, false);
  StreamingDetokenizer d(tok, {.stop = {"User:", "never"}});
  std::string all;
  for (int32_t id : ids) {
    all += d.push(id);
    // Never emit a tail that a stop string could still swallow.
    for (const std::string s : {"User:", "never"})
      for (size_t k = 1; k < s.size() && k <= all.size(); ++k)
        EXPECT_NE(all.substr(all.size() - k), s.substr(0, k)) << "emitted a stop prefix: '" << all << "'";
    if (d.stopped()) break;
  }
  EXPECT_TRUE(d.stopped());
  EXPECT_EQ(d.stop_index(), 0);
  EXPECT_EQ(all, "Hello world, the answer is here. ");
  EXPECT_EQ(d.text(), all);
  EXPECT_EQ(d.push(ids.back()), "");
  EXPECT_EQ(d.finish(), "");
}

TEST(StreamingDetokenizer, PartialStopPrefixIsReleasedWhenItDiverges) {
  auto tok = load("gpt-2");
  auto ids = tok->encode("a stab at it", false, false);
  StreamingDetokenizer d(tok, {.stop = {"stop"}});
  auto s = stream(d, ids);
  EXPECT_FALSE(d.stopped());
  EXPECT_EQ(s.all, "a stab at it");
  // The stop string split into single characters, one token each.
  StreamingDetokenizer d2(tok, {.stop = {"xyz"}});
  std::string out;
  for (const char* c : {"a", "x", "y", "z", "b"}) out += d2.push(*tok->find_token(c));
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(d2.stopped());
}

TEST(StreamingDetokenizer, StopStringInsideOneToken) {
  auto tok = load("gpt-2");
  auto ids = tok->encode(" hello", false, false);
  ASSERT_EQ(ids.size(), 1u);
  StreamingDetokenizer d(tok, {.stop = {"ll"}});
  EXPECT_EQ(d.push(ids[0]), " he");
  EXPECT_TRUE(d.stopped());
}

TEST(StreamingDetokenizer, LeadingSpaceRule) {
  auto tok = load("llama-spm");
  auto gen = tok->encode("Once upon a time", false, false);  // "▁Once" ...
  // After BOS only: the completion starts the text, its first space goes (as llama2.c / HF).
  StreamingDetokenizer a(tok, std::vector<int32_t>{tok->bos_id()}, {});
  EXPECT_EQ(stream(a, gen).all, "Once upon a time");
  EXPECT_EQ(tok->decode(gen), "Once upon a time");
  // After a prompt with text: " time" keeps its space.
  auto prompt = tok->encode("Once upon a", true, false);
  auto cont = tok->encode("time", false, false);  // "▁time"
  StreamingDetokenizer b(tok, prompt, {});
  EXPECT_EQ(stream(b, cont).all, " time");
  std::vector<int32_t> full = prompt;
  full.insert(full.end(), cont.begin(), cont.end());
  EXPECT_EQ(tok->decode(full, true), "Once upon a time");
  // Byte-level vocabularies never strip.
  auto q = load("qwen2");
  StreamingDetokenizer c(q, std::vector<int32_t>{}, {});
  EXPECT_EQ(stream(c, q->encode(" x", false, false)).all, " x");
}

TEST(StreamingDetokenizer, ConcatenationEqualsFullDecodeOnRandomText) {
  std::mt19937 rng(1234);
  const std::vector<uint32_t> alphabet = {'a', 'b', ' ', ' ', '\n', '.', '1', 'Z', 0xE9, 0x4E2D, 0x6587, 0x3042,
                                          0x1F600, 0x1F999, 0x20000, 0x0627, 0x0416, 0x2581, 0xFF01};
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm"}) {
    auto tok = load(name);
    for (int iter = 0; iter < 30; ++iter) {
      std::string text;
      int len = 1 + int(rng() % 40);
      for (int i = 0; i < len; ++i) tok::append_utf8(text, alphabet[rng() % alphabet.size()]);
      auto ids = tok->encode(text, true, false);
      // Completion that starts the text (empty prompt) == decode().
      StreamingDetokenizer d(tok, std::span<const int32_t>{}, {});
      auto s = stream(d, ids);
      EXPECT_EQ(s.all, sanitized(tok->decode(ids, true))) << name << " '" << text << "'";
      // Continuation (no stripping) == decode_continuation().
      StreamingDetokenizer dc(tok, {});
      EXPECT_EQ(stream(dc, ids).all, sanitized(tok->decode_continuation(ids, true))) << name;
      // With random stop strings the output is the decode cut before the first occurrence.
      std::string stop = text.substr(rng() % text.size(), 2);
      if (!is_valid_utf8_for_test(stop)) continue;
      StreamingDetokenizer ds(tok, std::span<const int32_t>{}, {.stop = {stop}});
      auto st = stream(ds, ids);
      std::string full = sanitized(tok->decode(ids, true));
      size_t f = full.find(stop);
      EXPECT_EQ(st.all, f == std::string::npos ? full : full.substr(0, f)) << name << " stop '" << stop << "'";
    }
  }
}

}  // namespace
}  // namespace tmill
