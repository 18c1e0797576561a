// Tiered routing: a virtual model (e.g. "auto", from the models file) sends each request to a real
// model by ordered rules; the first rule whose conditions all hold names a chain of models, tried in
// order (the next one when a model's queue is full or it cannot be loaded in time).
//
//   RouteDecision d = route(spec, input);   // pure: the input's facts are given or computed lazily
//
// Rule conditions (all that a rule sets must hold):
//   min_prompt_tokens / max_prompt_tokens  the prompt's length in tokens (the router's tokenizer)
//   has_tools                              the request has "tools" (and tool_choice is not "none")
//   has_json_schema                        a JSON schema or JSON object response format
//   last_user_regex                        a PCRE2 (Perl-syntax) regex searched in the last user message
//                                          (match, depth and heap limits: a pathological pattern on a long
//                                          message ends as "no match" instead of exhausting the stack)
//   header {name, equals}                  a request header (case-insensitive name)
//   metadata {key, equals}                 the request's "metadata" object (OpenAI's field)
//   classifier                             the classifier model's answer to the router's question
// A rule with no condition always matches (a catch-all).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace tmill::server {

// A compiled last_user_regex (PCRE2, UTF-8, with limits); defined in router.cpp.
class RouteRegex;

struct RouteRule {
  std::string name;
  std::optional<int64_t> min_prompt_tokens, max_prompt_tokens;
  std::optional<bool> has_tools;
  std::optional<bool> has_json_schema;
  std::string last_user_regex;               // empty: no condition
  std::shared_ptr<const RouteRegex> regex;   // compiled last_user_regex
  std::string header_name, header_equals;    // header_name empty: no condition
  std::string metadata_key, metadata_equals; // metadata_key empty: no condition
  std::string classifier_equals;             // empty: no condition
  std::vector<std::string> chain;            // models to try, in order
};

// A small model asked a question about the request, answering one of `choices` (a `choice`
// constraint, greedy): rules compare the answer.
struct RouteClassifier {
  std::string model;
  std::string question;  // the instruction; the last user message follows it
  std::vector<std::string> choices;
  int32_t max_message_chars = 2000;  // of the last user message shown to the classifier
};

struct RouterSpec {
  std::string name;                      // the virtual model's name ("auto")
  std::vector<RouteRule> rules;
  std::vector<std::string> default_chain;  // when no rule matches
  std::string tokenizer_model;           // whose tokenizer counts prompt tokens (default: first of default_chain)
  std::optional<RouteClassifier> classifier;
  double load_timeout_s = 0;             // how long a chain's on-demand model may take to load (0: the server's)
};

// What a rule may look at; the costly facts are computed only when a rule needs them.
struct RouteInput {
  bool has_tools = false;
  bool has_json_schema = false;
  std::string last_user_message;
  std::function<int64_t()> prompt_tokens;                           // null: 0
  std::function<std::optional<std::string>(const std::string&)> header;    // null: none
  std::function<std::optional<std::string>(const std::string&)> metadata;  // null: none
  std::function<Result<std::string>()> classify;                     // null: the classifier is unavailable
};

struct RouteDecision {
  std::string rule;                  // the matching rule's name, or "default"
  std::vector<std::string> chain;
  std::optional<std::string> classifier_error;  // the classifier failed (its rules did not match)
  std::string regex_limit_rule;  // a rule whose last_user_regex hit its match limits (taken as no match)
};

// Checks a spec (names, regexes, chains against the known models) and compiles its regexes.
Status prepare_router(RouterSpec& spec, const std::function<bool(const std::string&)>& model_exists);

RouteDecision route(const RouterSpec& spec, const RouteInput& in);

}  // namespace tmill::server
