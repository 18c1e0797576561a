// Prompt sets for the load generator.
//  random:        prompts of random words from a built-in list of common short English words (each
//                 usually one BPE token with its leading space), so N words ~ N prompt tokens; the
//                 exact count is taken from the server's usage report.
//  shared-prefix: every prompt = one of `num_prefixes` long random prefixes + a random suffix
//                 (measures prefix caching).
//  jsonl:         one JSON object per line: {"prompt": "..."} or {"messages": [...]}, optional
//                 "max_tokens".
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace tmill::loadgen {

struct Prompt {
  std::string text;         // prompt text (used unless `messages` is set)
  nlohmann::json messages;  // chat messages array from a jsonl file, else null
  int max_tokens = 0;       // requested output length
  int approx_tokens = 0;    // words generated (random datasets) or characters/4 (jsonl): a hint only
};

const std::vector<std::string_view>& word_list();
// `count` random words joined by single spaces.
std::string random_words(int count, std::mt19937_64& rng);
// Uniform integer in [len*(1-r), len*(1+r)], at least 1 (vLLM's --random-range-ratio).
int sample_length(int len, double range_ratio, std::mt19937_64& rng);

struct RandomDatasetConfig {
  size_t num_prompts = 100;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0.0;
  uint64_t seed = 0;
};
std::vector<Prompt> build_random_dataset(const RandomDatasetConfig& cfg);

struct SharedPrefixConfig {
  size_t num_prompts = 100;
  int prefix_len = 1024;  // words in each shared prefix
  int num_prefixes = 4;
  int suffix_len = 64;  // words after the prefix (varies with range_ratio)
  int output_len = 128;
  double range_ratio = 0.0;
  uint64_t seed = 0;
};
// Prompt i uses prefix i % num_prefixes.
std::vector<Prompt> build_shared_prefix_dataset(const SharedPrefixConfig& cfg);

// Reads up to `num_prompts` prompts (0 = all lines); when the file has fewer, it is cycled.
// Lines without "max_tokens" get `default_max_tokens`. Blank lines are skipped.
Result<std::vector<Prompt>> load_jsonl_dataset(const std::string& path, size_t num_prompts,
                                               int default_max_tokens);
Result<std::vector<Prompt>> parse_jsonl_dataset(std::string_view text, size_t num_prompts,
                                                int default_max_tokens);

}  // namespace tmill::loadgen
