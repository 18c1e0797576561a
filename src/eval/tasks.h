// Task files: the user's own evaluation cases, one JSON object per line (JSONL):
//
//   {"id": "refund-1", "prompt": "...", "expected": "30 days", "metric": "contains"}
//   {"messages": [{"role": "user", "content": "..."}], "expected": {"city": "Paris"}, "metric": "json_fields"}
//   {"prompt": "...", "choices": ["red", "green"], "expected": "B", "metric": "choice"}
//
// and the metric functions that score an answer. Exact definitions: docs/eval.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace tmill::eval {

enum class Metric { Exact, Contains, Regex, JsonFields, Choice };
const char* metric_name(Metric m);
std::optional<Metric> metric_from_name(std::string_view name);

struct TaskCase {
  std::string id;                   // "id", else "line-N"
  int line = 0;                     // 1-based line in the task file
  std::optional<std::string> prompt;               // raw completion prompt
  std::optional<nlohmann::ordered_json> messages;  // chat messages (rendered with the model's template)
  Metric metric = Metric::Exact;
  // exact/contains/regex: a string or an array of strings (any one passes); choice: a label or an
  // option text; json_fields: an object of field -> expected value.
  nlohmann::json expected;
  std::vector<std::string> choices;  // choice: option texts
  std::vector<std::string> labels;   // choice: option labels (default "A", "B", ...)
  bool ignore_case = false;          // exact/contains/choice: ASCII case-insensitive comparison
  int32_t max_tokens = 0;            // 0: the run's default
  std::vector<std::string> stop;     // stop strings
};

// One line (already known to be non-blank). Errors name the problem; the caller adds file:line.
Result<TaskCase> parse_task_case(std::string_view json_line, int line);
// Every non-blank line of a JSONL file; ids must be unique.
Result<std::vector<TaskCase>> parse_task_file(const std::string& path);
Result<std::vector<TaskCase>> parse_task_text(std::string_view text);

struct MetricResult {
  bool pass = false;
  std::string detail;  // what matched, or why not
};
// Scores a generated answer. A leading "<think>...</think>" block (reasoning models) is removed first.
MetricResult score_answer(const TaskCase& c, std::string_view answer);

// The metric functions (the answer as scored, after think-stripping).
std::string_view trim(std::string_view s);
std::string strip_think(std::string_view answer);
bool metric_exact(std::string_view answer, std::string_view expected, bool ignore_case = false);
bool metric_contains(std::string_view answer, std::string_view expected, bool ignore_case = false);
// PCRE2 (UTF mode), searched anywhere in the answer. Errors: an invalid pattern.
Result<bool> metric_regex(std::string_view answer, const std::string& pattern);
// The JSON objects found in the answer: every '{' that starts a complete JSON object (strings and
// nesting respected), scanning left to right and continuing after each object found.
std::vector<nlohmann::json> find_json_objects(std::string_view answer);
// True when one of the answer's JSON objects has every field of `expected` equal to its value
// (JSON equality: 1 == 1.0, strings exact). "a.b" paths address nested objects.
bool metric_json_fields(std::string_view answer, const nlohmann::json& expected, std::string* detail = nullptr);
// The option the answer picks: the earliest occurrence of a label or an option text (see
// docs/eval.md), or -1.
int pick_choice(std::string_view answer, const std::vector<std::string>& choices, const std::vector<std::string>& labels,
                bool ignore_case = false);
// The option `expected` names (a label or an option text), or -1.
int expected_choice(std::string_view expected, const std::vector<std::string>& choices,
                    const std::vector<std::string>& labels, bool ignore_case = false);

}  // namespace tmill::eval
