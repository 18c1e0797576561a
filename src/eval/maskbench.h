// MaskBench (JSONSchemaBench's mask benchmark) run against the grammar engine: compile each
// schema, then feed each test instance, serialized like Python's json.dumps(data,
// ensure_ascii=False) and tokenized without special tokens, token by token: compute the mask, check
// the token is allowed, commit it. A valid instance must be accepted to its end and leave the
// grammar accepting; an invalid one must hit a disallowed token or end non-accepting.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "grammar/grammar.h"

namespace tmill {
class Tokenizer;
}

namespace tmill::eval {

struct MaskBenchCase {
  std::string id;        // file name without ".json"
  std::string category;  // meta.category, else the file-name prefix (before "---" or "_<n>")
  nlohmann::ordered_json schema;
  struct Test {
    bool valid = false;
    std::string text;  // the serialized instance
  };
  std::vector<Test> tests;
};

Result<MaskBenchCase> load_maskbench_case(const std::string& path);
// Python's json.dumps(v, ensure_ascii=False): ", " and ": " separators, floats as repr().
std::string python_json_dumps(const nlohmann::ordered_json& v);
// The *.json files of a folder, sorted.
Result<std::vector<std::string>> maskbench_files(const std::string& dir);

// The grammar's vocabulary from a tokenizer (Tokenizer::token_bytes_all, end-of-generation ids).
std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const Tokenizer& tok);

struct SchemaResult {
  std::string id, category;
  std::string status;  // passing / compile_error / validation_error / invalidation_error / timeout
  std::string error;   // compile error, or which test was misjudged
  double ttfm_us = 0;  // compile + first mask
  int64_t tokens = 0;  // tokens fed (all tests)
  double mean_mask_us = 0, max_mask_us = 0;
  std::vector<float> mask_us;  // per token: mask + commit
};

struct MaskBenchOptions {
  int threads = 2;           // schemas run in parallel, each on one thread
  int64_t timeout_ms = 10000;
  bool flexible_whitespace = true;  // json.dumps writes ", " and ": "
  bool any_order = true;            // instances list properties in their own order (JsonOptions::any_order)
  bool masks = true;                // false: judge by accept_token alone (a quick correctness pass)
  int64_t progress_ms = 2000;       // on_progress at most this often (and after the last schema)
};

// One schema, on the calling thread.
SchemaResult run_maskbench_case(const MaskBenchCase& c, const std::shared_ptr<const grammar::Vocabulary>& vocab,
                                const Tokenizer& tok, const MaskBenchOptions& opt);

struct MaskBenchReport {
  std::vector<SchemaResult> results;  // in file order (those finished so far)
  nlohmann::ordered_json to_json() const;  // the format
  std::string table() const;               // totals and by category, percentiles
};

// Every file, `threads` at a time. on_progress runs (under a lock) after a schema with the report
// so far, at most every progress_ms, e.g. to rewrite the JSON file.
MaskBenchReport run_maskbench(const std::vector<std::string>& files, const Tokenizer& tok, const MaskBenchOptions& opt,
                              const std::function<void(const MaskBenchReport&, size_t done)>& on_progress = {});

}  // namespace tmill::eval
