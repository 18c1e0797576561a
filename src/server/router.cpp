#include "server/router.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

namespace tmill::server {

// std::regex was used here first: libstdc++ matches by recursion, one level per character a
// quantifier consumes, so a rule such as "code.*review" over a long user message (untrusted input)
// overflowed the stack of the server thread. PCRE2's interpreter backtracks on the heap, and the
// limits below bound its work: a match that hits one counts as no match (with a warning).
class RouteRegex {
 public:
  static Result<std::shared_ptr<const RouteRegex>> compile(const std::string& re) {
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                                     PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return Error{fmt::format("at offset {}: {}", off, reinterpret_cast<const char*>(msg))};
    }
    auto r = std::make_shared<RouteRegex>();
    r->code_ = code;
    return std::shared_ptr<const RouteRegex>(std::move(r));
  }
  ~RouteRegex() { pcre2_code_free(code_); }
  // True when the pattern matches somewhere in `text`; *limit_hit when a limit ended the search.
  bool search(const std::string& text, bool* limit_hit) const {
    pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    if (ctx) {
      pcre2_set_match_limit(ctx, 1'000'000);
      pcre2_set_depth_limit(ctx, 10'000);
      pcre2_set_heap_limit(ctx, 16 * 1024);  // KiB
    }
    const int rc = md ? pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, ctx)
                      : PCRE2_ERROR_NOMEMORY;
    pcre2_match_data_free(md);
    pcre2_match_context_free(ctx);
    *limit_hit = rc < 0 && rc != PCRE2_ERROR_NOMATCH;
    return rc >= 0;
  }

 private:
  pcre2_code* code_ = nullptr;
};

Status prepare_router(RouterSpec& spec, const std::function<bool(const std::string&)>& model_exists) {
  const std::string where = "router '" + spec.name + "'";
  auto check_chain = [&](const std::vector<std::string>& chain, const std::string& what) -> Status {
    if (chain.empty()) return Error{fmt::format("{}: {} names no model", where, what)};
    for (const auto& m : chain)
      if (!model_exists(m)) return Error{fmt::format("{}: {} names the unknown model '{}'", where, what, m)};
    return {};
  };
  if (spec.default_chain.empty()) return Error{where + ": 'default' (the model when no rule matches) is required"};
  TM_TRY(check_chain(spec.default_chain, "'default'"));
  if (spec.tokenizer_model.empty()) spec.tokenizer_model = spec.default_chain[0];
  if (!model_exists(spec.tokenizer_model))
    return Error{fmt::format("{}: 'tokenizer_model' names the unknown model '{}'", where, spec.tokenizer_model)};
  if (spec.classifier) {
    if (!model_exists(spec.classifier->model))
      return Error{fmt::format("{}: the classifier's model '{}' is unknown", where, spec.classifier->model)};
    if (spec.classifier->choices.size() < 2)
      return Error{fmt::format("{}: the classifier needs at least two 'choices'", where)};
    if (spec.classifier->question.empty()) return Error{fmt::format("{}: the classifier needs a 'question'", where)};
  }
  for (size_t i = 0; i < spec.rules.size(); ++i) {
    RouteRule& r = spec.rules[i];
    if (r.name.empty()) r.name = fmt::format("rule{}", i + 1);
    TM_TRY(check_chain(r.chain, "rule '" + r.name + "'"));
    if (!r.last_user_regex.empty()) {
      auto re = RouteRegex::compile(r.last_user_regex);
      if (!re.ok())
        return Error{fmt::format("{}: rule '{}': last_user_regex '{}' does not compile: {}", where, r.name,
                                 r.last_user_regex, re.error())};
      r.regex = std::move(re).value();
    }
    if (!r.classifier_equals.empty()) {
      if (!spec.classifier)
        return Error{fmt::format("{}: rule '{}' asks the classifier, but the router has no 'classifier'", where, r.name)};
      bool known = false;
      for (const auto& c : spec.classifier->choices) known |= c == r.classifier_equals;
      if (!known)
        return Error{fmt::format("{}: rule '{}': '{}' is not one of the classifier's choices", where, r.name,
                                 r.classifier_equals)};
    }
  }
  return {};
}

RouteDecision route(const RouterSpec& spec, const RouteInput& in) {
  RouteDecision d;
  std::optional<int64_t> tokens;  // computed at most once
  std::optional<Result<std::string>> answer;
  for (const RouteRule& r : spec.rules) {
    if (r.has_tools && *r.has_tools != in.has_tools) continue;
    if (r.has_json_schema && *r.has_json_schema != in.has_json_schema) continue;
    if (r.regex) {
      bool limit_hit = false;
      if (!r.regex->search(in.last_user_message, &limit_hit)) {
        if (limit_hit) d.regex_limit_rule = r.name;
        continue;
      }
    }
    if (!r.header_name.empty()) {
      auto v = in.header ? in.header(r.header_name) : std::nullopt;
      if (!v || *v != r.header_equals) continue;
    }
    if (!r.metadata_key.empty()) {
      auto v = in.metadata ? in.metadata(r.metadata_key) : std::nullopt;
      if (!v || *v != r.metadata_equals) continue;
    }
    if (r.min_prompt_tokens || r.max_prompt_tokens) {
      if (!tokens) tokens = in.prompt_tokens ? in.prompt_tokens() : 0;
      if (r.min_prompt_tokens && *tokens < *r.min_prompt_tokens) continue;
      if (r.max_prompt_tokens && *tokens > *r.max_prompt_tokens) continue;
    }
    if (!r.classifier_equals.empty()) {
      if (!answer) answer = in.classify ? in.classify() : Result<std::string>(Error{"no classifier"});
      if (!answer->ok()) {
        d.classifier_error = answer->error();
        continue;
      }
      if (answer->value() != r.classifier_equals) continue;
    }
    d.rule = r.name;
    d.chain = r.chain;
    return d;
  }
  d.rule = "default";
  d.chain = spec.default_chain;
  return d;
}

}  // namespace tmill::server
