// What the server's mapping tests share: the bundled stories260K tokenizer, the real Qwen3 tokenizer
// (tests/data/tokenizers/hf/qwen3: Qwen2.5-Coder's fill-in-the-middle tokens), and a weather tool's
// parameters schema that even stories260K fills validly under a grammar (an enum, no extra keys).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace tmill::test {

inline std::shared_ptr<const Tokenizer> stories_tokenizer() {
  static std::shared_ptr<const Tokenizer> tok = [] {
    auto t = Tokenizer::load(source_path("models/stories260K/stories260K.gguf"));
    EXPECT_TRUE(t.ok()) << t.error();
    return std::shared_ptr<const Tokenizer>(*t);
  }();
  return tok;
}

inline std::shared_ptr<const Tokenizer> qwen3_tokenizer() {
  static std::shared_ptr<const Tokenizer> tok = [] {
    const std::string dir = temp_dir() + "/qwen3-tokenizer";
    const std::string src = source_path("tests/data/tokenizers/hf/qwen3");
    auto r = run_command("mkdir -p '" + dir + "' && gzip -dc '" + src + "/tokenizer.json.gz' > '" + dir +
                         "/tokenizer.json' && cp '" + src + "/tokenizer_config.json' '" + dir + "/'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto t = Tokenizer::from_hf_dir(dir);
    EXPECT_TRUE(t.ok()) << t.error();
    return std::shared_ptr<const Tokenizer>(*t);
  }();
  return tok;
}

// {"city": "Paris" | "Rome"}, required, nothing else.
inline const nlohmann::ordered_json& weather_schema() {
  static const nlohmann::ordered_json s = {{"type", "object"},
                                           {"properties", {{"city", {{"enum", {"Paris", "Rome"}}}}}},
                                           {"required", {"city"}},
                                           {"additionalProperties", false}};
  return s;
}

}  // namespace tmill::test
