// Helpers for the tokenizer tests (and tests/unit/convert/hf_tokenizer_test.cpp): conformance vectors,
// the HF folders and their GGUF twins, data paths.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/strings.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace tmill {
inline bool is_valid_utf8_for_test(std::string_view s) { return is_valid_utf8(s); }
}  // namespace tmill

namespace tmill::test {

inline std::string slurp_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string vocab_path(const std::string& name) {
  return source_path("tests/data/tokenizers/ggml-vocab-" + name + ".gguf");
}

// NAME.gguf.inp / .out: strings separated by "\n__ggml_vocab_test__\n" (the last marker ends the
// file) and one line of space-separated ids per string.
inline std::vector<std::pair<std::string, std::vector<int32_t>>> load_vectors(const std::string& name) {
  const std::string inp = slurp_file(vocab_path(name) + ".inp");
  const std::string out = slurp_file(vocab_path(name) + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (pos < inp.size()) {
    size_t f = inp.find(sep, pos);
    if (f == std::string::npos) break;
    texts.push_back(inp.substr(pos, f - pos));
    pos = f + sep.size();
  }
  std::vector<std::pair<std::string, std::vector<int32_t>>> v;
  std::istringstream lines(out);
  std::string line;
  for (const auto& t : texts) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    std::vector<int32_t> expect;
    int64_t id;
    while (ids >> id) expect.push_back(int32_t(id));
    v.emplace_back(t, std::move(expect));
  }
  return v;
}

// How many of the vectors in `name` the tokenizer encodes exactly (no special handling); each miss is
// a test failure naming the text.
inline int count_passing(const Tokenizer& tok, const std::string& name) {
  int pass = 0;
  for (const auto& [text, expect] : load_vectors(name)) {
    auto got = tok.encode(text, false, false);
    if (got == expect) ++pass;
    else ADD_FAILURE() << name << ": '" << text << "'";
  }
  return pass;
}

// The CLI: $TM_BINARY when set, else <build>/tokenmill next to this test's <build>/tests/ folder.
inline std::string cli_binary() {
  std::string b = tokenmill_binary();
  if (b != "tokenmill") return b;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto cand = exe.parent_path().parent_path() / "tokenmill";
    if (std::filesystem::exists(cand, ec)) return cand.string();
  }
  return b;
}

// HF tokenizer folders and their GGUF twins: the ggml-vocab vectors they must pass, and the
// tokenizer.ggml.pre family they are detected as.
struct HfTwin {
  const char* hf;
  const char* gguf;
  const char* pre;
};
inline constexpr HfTwin kHfTwins[] = {{"qwen3", "qwen2", "qwen2"}, {"llama3", "llama-bpe", "llama-bpe"}};

// The HF folders are stored with tokenizer.json gzip-compressed; this unpacks one into a temp
// directory (once per process) and returns the folder.
inline std::string hf_dir(const std::string& name) {
  static std::vector<std::pair<std::string, std::string>> done;
  for (auto& [n, d] : done) if (n == name) return d;
  const std::string src = source_path("tests/data/tokenizers/hf/" + name);
  const std::string dst = temp_dir() + "/hf-" + name;
  run_command("mkdir -p '" + dst + "' && gzip -dc '" + src + "/tokenizer.json.gz' > '" + dst +
              "/tokenizer.json' && cp '" + src + "/tokenizer_config.json' '" + dst + "/'");
  done.emplace_back(name, dst);
  return dst;
}

}  // namespace tmill::test
