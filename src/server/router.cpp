#include "server/router.h"

#include <fmt/format.h>

namespace tmill::server {

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
      try {
        r.regex = std::make_shared<const std::regex>(r.last_user_regex, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return Error{fmt::format("{}: rule '{}': last_user_regex '{}' does not compile: {}", where, r.name,
                                 r.last_user_regex, e.what())};
      }
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
    if (r.regex && !std::regex_search(in.last_user_message, *r.regex)) continue;
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
