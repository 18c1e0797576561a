// Mask timing on the Llama 3 vocabulary (128k tokens): a micro benchmark, run only with
// TM_GRAMMAR_BENCH=1 (it prints p50/p99/max mask time and compile time), plus a check, run always
// when the tokenizer is present, that masks along a real JSON document equal the exact trie walk.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "grammar_test_util.h"

using namespace tmill::grammar;
using namespace tmill::grammar::testing;

namespace {

// Byte-level BPE: GPT-2's byte-to-unicode alphabet mapped back to raw bytes.
std::string bpe_to_bytes(const std::string& s) {
  static std::map<uint32_t, uint8_t> rev = [] {
    std::map<uint32_t, uint8_t> m;
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      m[keep ? b : 256 + n++] = static_cast<uint8_t>(b);
    }
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len && i + static_cast<size_t>(k) < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
    i += static_cast<size_t>(len);
    auto it = rev.find(cp);
    if (it == rev.end()) return {};  // not a byte-level token
    out += static_cast<char>(it->second);
  }
  return out;
}

std::shared_ptr<const Vocabulary> llama3_vocab() {
  const char* env = std::getenv("TM_LLAMA3_TOKENIZER");
  std::string path = env ? env : std::string(TM_SOURCE_DIR) + "/../shared/tokenizers/hf/llama3/tokenizer.json";
  std::ifstream f(path);
  if (!f) return nullptr;
  auto j = nlohmann::json::parse(f);
  VocabularyData d;
  size_t n = j["model"]["vocab"].size() + j["added_tokens"].size();
  d.token_bytes.assign(n, "");
  for (auto& [k, v] : j["model"]["vocab"].items()) d.token_bytes[v.get<size_t>()] = bpe_to_bytes(k);
  for (auto& t : j["added_tokens"]) {
    auto id = t["id"].get<size_t>();
    if (id >= d.token_bytes.size()) d.token_bytes.resize(id + 1);
    d.token_bytes[id].clear();
    std::string c = t["content"];
    if (c == "<|end_of_text|>" || c == "<|eot_id|>") d.eos_tokens.push_back(static_cast<int32_t>(id));
  }
  return Vocabulary::create(std::move(d));
}

// Greedy longest-match tokenization (not BPE, but gives realistic multi-byte tokens).
std::vector<int32_t> tokenize(const Vocabulary& v, const std::string& text) {
  std::map<std::string, int32_t> by_bytes;
  for (int32_t t = 0; t < v.size(); ++t) {
    if (!v.token_bytes(t).empty()) by_bytes.emplace(v.token_bytes(t), t);
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i < text.size();) {
    size_t best = 0;
    int32_t tok = -1;
    for (size_t len = 1; len <= 32 && i + len <= text.size(); ++len) {
      auto it = by_bytes.find(text.substr(i, len));
      if (it != by_bytes.end()) best = len, tok = it->second;
    }
    if (tok < 0) return {};
    out.push_back(tok);
    i += best;
  }
  return out;
}

const char* kJson = R"(root ::= object
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" char* "\"" ws
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4})
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

const char* kDoc =
    R"({"id": 12345, "name": "Grace Hopper", "email": "grace@example.com", "tags": ["navy", "cobol", "compilers"],)"
    R"( "score": -12.75e3, "active": true, "bio": "Computer scientist; \"Amazing Grace\" \u00e9l\u00e8ve. 日本語 text.",)"
    R"( "nested": {"a": [1, 2, 3, {"b": null}], "c": "done"}})";

struct Timing {  // percentiles of a sample
  std::vector<double> us;
  void print(const char* what) {
    std::sort(us.begin(), us.end());
    auto pct = [&](double p) { return us[std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())))]; };
    std::printf("%-34s n=%zu p50=%.1fus p99=%.1fus max=%.1fus\n", what, us.size(), pct(0.5), pct(0.99), us.back());
  }
};


// A JSON-Schema-shaped grammar: fixed keys, a maxLength string (a counted repetition), integers.
const char* kSchemaLike = R"(root ::= "{" space "\"name\"" space ":" space str "," space "\"age\"" space ":" space int "," space "\"tags\"" space ":" space "[" space (str ("," space str)*)? "]" space "}" space
str ::= "\"" char{0,32767} "\"" space
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
int ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) space
space ::= | " " | "\n" [ \t]{0,20}
)";
const char* kSchemaDoc =
    R"({"name": "Grace Brewster Murray Hopper, rear admiral and pioneer of machine-independent languages", "age": 85,)"
    R"( "tags": ["navy", "COBOL", "compilers", "\"bug\" \u00e9t\u00e9 日本"]})";

void run_case(const std::shared_ptr<const Vocabulary>& v, const char* name, const char* gbnf, const char* doc,
              bool bench) {
  auto toks = tokenize(*v, doc);
  ASSERT_FALSE(toks.empty());
  Timing compile_t, mask_t, first_t;
  std::shared_ptr<const Grammar> g;
  for (int i = 0; i < (bench ? 20 : 1); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = compile_gbnf(gbnf, v);
    compile_t.us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_TRUE(r.ok()) << r.error();
    g = r.value();
  }
  std::vector<uint32_t> mask(Matcher::mask_words(v->size()));
  for (int rep = 0; rep < (bench ? 3 : 1); ++rep) {
    Matcher m(g);
    for (size_t i = 0; i < toks.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      m.fill_mask(mask);
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      (rep == 0 ? first_t : mask_t).us.push_back(us);
      ASSERT_TRUE(mask_has(mask, toks[i])) << "token " << i << " '" << v->token_bytes(toks[i]) << "' refused";
      if (!bench && i % 5 == 0) {
        std::vector<uint32_t> want(mask.size(), 0);
        Matcher c(m);
        c.fill_mask_reference(want);
        ASSERT_EQ(want, mask) << "at token " << i << mask_diff(*v, want, mask);
      }
      ASSERT_TRUE(m.accept_token(toks[i]));
    }
    EXPECT_TRUE(m.accepting());
  }
  if (bench) {
    std::string n(name);
    compile_t.print(("compile " + n).c_str());
    first_t.print(("mask, first pass " + n).c_str());
    mask_t.print(("mask, warm " + n).c_str());
  }
}

}  // namespace

TEST(MaskBench, Llama3) {
  auto v = llama3_vocab();
  if (!v) GTEST_SKIP() << "no Llama 3 tokenizer.json";
  bool bench = std::getenv("TM_GRAMMAR_BENCH") != nullptr;
  run_case(v, "json.gbnf", kJson, kDoc, bench);
  run_case(v, "schema-like", kSchemaLike, kSchemaDoc, bench);
}
