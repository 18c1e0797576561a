// Request mapping shared by both endpoints (sampling, stop conditions, limits) and /v1/completions.
#include "server/openai_request.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include <fmt/format.h>

#include "chat/messages.h"
#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {
namespace detail {

std::string check_model(const json& body, const ServerContext& ctx) {
  auto model = opt_string(body, "model");
  if (model && *model != ctx.served_model_name) {
    ApiError e;
    e.status = 404;
    e.message = fmt::format("The model `{}` does not exist.", *model);
    e.param = "model";
    e.code = "model_not_found";
    throw RequestError{e};
  }
  return ctx.served_model_name;
}

namespace {

void map_logit_bias(const json& body, SamplingParams& sp) {
  const json* lb = field(body, "logit_bias");
  if (!lb) return;
  if (!lb->is_object()) throw_bad_request("'logit_bias' must be an object of token id -> bias", "logit_bias");
  if (lb->size() > 1024) throw_bad_request("'logit_bias' has more than 1024 entries", "logit_bias");
  for (auto it = lb->begin(); it != lb->end(); ++it) {
    const std::string& key = it.key();
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const long long id = digits ? std::strtoll(key.c_str(), nullptr, 10) : -1;
    if (id < 0 || id > INT32_MAX) throw_bad_request(fmt::format("logit_bias key '{}' is not a token id", key), "logit_bias");
    if (!it.value().is_number()) throw_bad_request("logit_bias values must be numbers", "logit_bias");
    const double b = it.value().get<double>();
    // Out-of-range values (the engine allows [-100, 100]) keep their sign and stay out of range as floats.
    sp.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(std::clamp(b, -1e6, 1e6)));
  }
}

void map_stop(const json& body, const ServerContext& ctx, GenerateRequest& r) {
  if (const json* s = field(body, "stop")) {
    auto add = [&](const json& v) {
      if (!v.is_string()) throw_bad_request("'stop' must be a string or an array of strings", "stop");
      std::string str = v.get<std::string>();
      if (!str.empty()) r.stop.push_back(std::move(str));  // an empty stop string stops nothing
    };
    if (s->is_array()) {
      if (static_cast<int64_t>(s->size()) > ctx.max_stop)
        throw_bad_request(fmt::format("'stop' has more than {} entries", ctx.max_stop), "stop");
      for (const json& v : *s) add(v);
    } else {
      add(*s);
    }
  }
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) throw_bad_request("'stop_token_ids' must be an array of token ids", "stop_token_ids");
    if (static_cast<int64_t>(ids->size()) > ctx.max_stop)
      throw_bad_request(fmt::format("'stop_token_ids' has more than {} entries", ctx.max_stop), "stop_token_ids");
    for (const json& v : *ids)
      r.stop_token_ids.push_back(static_cast<int32_t>(as_int(v, "stop_token_ids", INT32_MIN, INT32_MAX)));
  }
}

}  // namespace

void map_common(const json& body, const ServerContext& ctx, ApiKind kind, GenerateRequest& r, MappedRequest& m) {
  m.model = check_model(body, ctx);
  m.kind = kind;
  m.stream = opt_bool(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw_bad_request("'stream_options' must be an object", "stream_options");
    if (!m.stream) throw_bad_request("'stream_options' can only be set when 'stream' is true", "stream_options");
    m.include_usage = opt_bool(*so, "include_usage").value_or(false);
    m.continuous_usage = opt_bool(*so, "continuous_usage_stats").value_or(false);
  }
  // Ranges (n >= 1, top_p in (0, 1], penalties, ...) are the engine's to check (check_request, called
  // by finish_prompt); here only JSON types and this server's own limits (--max-n).
  m.n = static_cast<int32_t>(opt_int(body, "n", INT32_MIN, INT32_MAX).value_or(1));
  if (m.n > ctx.max_n) throw_bad_request(fmt::format("'n' must be at most {} (the server's --max-n)", ctx.max_n), "n");
  if (auto best_of = opt_int(body, "best_of", INT32_MIN, INT32_MAX); best_of && *best_of != m.n)
    throw_bad_request("'best_of' different from 'n' is not supported", "best_of");
  r.n = m.n;

  SamplingParams& sp = r.sampling;
  const GenerationDefaults& dflt = ctx.defaults;  // --generation-config (the model's recommendations)
  sp.temperature = opt_float(body, "temperature").value_or(dflt.temperature.value_or(1.0f));
  sp.top_p = opt_float(body, "top_p").value_or(dflt.top_p.value_or(1.0f));
  const int64_t top_k = opt_int(body, "top_k", -1, INT32_MAX).value_or(dflt.top_k.value_or(0));
  sp.top_k = top_k <= 0 ? 0 : static_cast<int32_t>(top_k);  // -1 (vLLM) and 0: disabled
  sp.min_p = opt_float(body, "min_p").value_or(dflt.min_p.value_or(0.0f));
  sp.presence_penalty = opt_float(body, "presence_penalty").value_or(0.0f);
  sp.frequency_penalty = opt_float(body, "frequency_penalty").value_or(0.0f);
  sp.repetition_penalty = opt_float(body, "repetition_penalty").value_or(dflt.repetition_penalty.value_or(1.0f));
  if (auto seed = opt_int(body, "seed", INT64_MIN, INT64_MAX)) sp.seed = static_cast<uint64_t>(*seed);
  map_logit_bias(body, sp);
  map_stop(body, ctx, r);

  r.ignore_eos = opt_bool(body, "ignore_eos").value_or(false);
  r.speculative = opt_bool(body, "speculative").value_or(true);  // false: no speculative decoding
  r.min_tokens = static_cast<int32_t>(opt_int(body, "min_tokens", INT32_MIN, INT32_MAX).value_or(0));
  r.skip_special_tokens = opt_bool(body, "skip_special_tokens").value_or(true);
  r.include_stop_str_in_output = opt_bool(body, "include_stop_str_in_output").value_or(false);
  r.priority = static_cast<int32_t>(opt_int(body, "priority", INT32_MIN, INT32_MAX).value_or(0));
  (void)opt_string(body, "user");  // accepted, type-checked, unused
  r.constraint = map_structured_output(body);  // structured_request.cpp
  r.queue_timeout_s = ctx.queue_timeout_s;
  // The whole request's deadline, from arrival to the last byte; the server's maximum caps it.
  m.deadline_s = ctx.max_request_time_s;
  if (auto t = opt_number(body, "timeout", 0.0, 1e9)) {
    if (*t <= 0) throw_bad_request("'timeout' must be a positive number of seconds", "timeout");
    m.deadline_s = m.deadline_s > 0 ? std::min(*t, m.deadline_s) : *t;
  }
}

void finish_prompt(const json& body, const ServerContext& ctx, ApiKind kind, std::optional<int64_t> max_tokens,
                   MappedPrompt& p) {
  std::vector<int32_t>& tokens = p.request.prompt;
  const char* what = kind == ApiKind::Chat ? "messages" : "prompt";
  p.original_tokens = static_cast<int32_t>(std::min<size_t>(tokens.size(), INT32_MAX));
  if (auto trunc = opt_int(body, "truncate_prompt_tokens", -1, INT32_MAX)) {
    if (*trunc == 0) throw_bad_request("'truncate_prompt_tokens' must be -1 or at least 1", "truncate_prompt_tokens");
    const int64_t keep = *trunc == -1 ? ctx.max_model_len : *trunc;
    if (keep > ctx.max_model_len)
      throw_bad_request(fmt::format("'truncate_prompt_tokens' ({}) is larger than the context length ({} tokens)", keep,
                                    ctx.max_model_len),
                        "truncate_prompt_tokens");
    if (static_cast<int64_t>(tokens.size()) > keep) {
      tokens.erase(tokens.begin(), tokens.end() - keep);  // keep the last `keep` tokens
      p.truncated = true;
    }
  }
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (len == 0) throw_bad_request(fmt::format("The {} produce no tokens", what), what);
  const int64_t room = ctx.max_model_len - len;
  int64_t mt = 0;
  if (max_tokens) {
    mt = *max_tokens;
  } else if (ctx.defaults.max_tokens) {
    mt = std::min<int64_t>(*ctx.defaults.max_tokens, room);  // the generation config's max_new_tokens
  } else if (kind == ApiKind::Completion) {
    mt = std::min<int64_t>(16, room);  // OpenAI's documented default for /v1/completions
  } else {
    // chat (as vLLM) and llama-server's /completion (n_predict -1): the rest of the context, capped
    // by --max-tokens-default
    mt = room;
    if (ctx.max_tokens_default > 0) mt = std::min<int64_t>(mt, ctx.max_tokens_default);
    // --context-shift: generation may run past the context, up to --max-tokens-default
    if (ctx.context_shift && ctx.max_tokens_default > 0) mt = ctx.max_tokens_default;
  }
  p.request.max_tokens = static_cast<int32_t>(std::clamp<int64_t>(mt, INT32_MIN, INT32_MAX));
  if (auto problem = ctx.check ? ctx.check(p.request) : check_request(p.request, ctx.limits())) {
    // The engine's limits, with this API's names: chat prompts are "messages", and chat's
    // max_completion_tokens replaces max_tokens when given.
    ApiError e = bad_request(problem->message, problem->field);
    if (problem->field == "prompt") e.param = what;
    if (problem->field == "max_tokens" && kind == ApiKind::Chat && field(body, "max_completion_tokens"))
      e.param = "max_completion_tokens";
    if (problem->kind == RequestProblem::Kind::ContextLength) {
      e.code = "context_length_exceeded";
      e.message += problem->field == "prompt"
                       ? fmt::format(" Please reduce the length of the {} (or set truncate_prompt_tokens).", what)
                       : fmt::format(" Please reduce the length of the {} or completion.", what);
    }
    throw RequestError{e};
  }
}

}  // namespace detail

namespace {

using namespace detail;

std::vector<int32_t> token_prompt(const json& arr, const ServerContext& ctx) {
  if (arr.empty()) throw_bad_request("a token-id prompt must not be empty", "prompt");
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const json& v : arr) {
    if (!v.is_number_integer())
      throw_bad_request("'prompt' must be a string, an array of strings, an array of token ids or an array of "
                        "token-id arrays",
                        "prompt");
    ids.push_back(static_cast<int32_t>(as_int(v, "prompt", INT32_MIN, INT32_MAX)));
  }
  return ids;
}

template <class F>
Result<MappedRequest> guarded(F&& f, ApiError* err) {
  try {
    return f();
  } catch (const RequestError& e) {
    if (err) *err = e.error;
    return Error{e.error.message};
  } catch (const std::exception& e) {
    // nlohmann type errors and the like: still the client's request that was wrong.
    ApiError a = bad_request(std::string("Invalid request: ") + e.what());
    if (err) *err = a;
    return Error{a.message};
  }
}

}  // namespace

Result<MappedRequest> map_completion_request(const json& body, const ServerContext& ctx, ApiError* err) {
  return guarded([&] { return map_completions(body, ctx, ApiKind::Completion); }, err);
}

std::vector<int32_t> detail::tokenize_mixed(const json& v, const Tokenizer& tok, bool add_special, bool parse_special,
                                            const std::function<int32_t(const json&)>& id) {
  std::vector<int32_t> out;
  auto add = [&](const json& e, bool first) {
    if (!e.is_string()) {
      out.push_back(id(e));
      return;
    }
    const std::vector<int32_t> ids = tok.encode(e.get<std::string>(), add_special && first, parse_special);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  if (!v.is_array()) {
    add(v, true);
  } else {
    for (size_t i = 0; i < v.size(); ++i) add(v[i], i == 0);
  }
  return out;
}

Result<MappedRequest> detail::guard_mapping(const std::function<MappedRequest()>& map, ApiError* err) {
  return guarded(map, err);
}

MappedRequest detail::map_completions(const json& body, const ServerContext& ctx, ApiKind kind) {
  if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
  MappedRequest m;
  GenerateRequest base;
  map_common(body, ctx, kind, base, m);
  m.echo = opt_bool(body, "echo").value_or(false);
  if (auto lp = opt_int(body, "logprobs", 0, ctx.max_logprobs)) {
    m.logprobs = true;
    m.top_logprobs = static_cast<int32_t>(*lp);
    base.sampling.logprobs = m.top_logprobs;
  }
  if (m.echo && m.logprobs)
    throw_bad_request("'echo' with 'logprobs' needs prompt logprobs, which this server does not compute",
                      "logprobs");
  // suffix (OpenAI's insertion): the model writes what goes between prompt and suffix, through its
  // fill-in-the-middle tokens: [BOS] [PRE] prompt [SUF] suffix [MID] (the suffix's text stays text).
  std::vector<int32_t> suffix_ids;
  if (auto suffix = opt_string(body, "suffix"); suffix && !suffix->empty()) {
    const Tokenizer& t = *ctx.tokenizer;
    if (t.fim_pre_id() < 0 || t.fim_suf_id() < 0 || t.fim_mid_id() < 0)
      throw_bad_request("'suffix' needs a model with fill-in-the-middle tokens, which this model lacks", "suffix");
    if (m.echo) throw_bad_request("'echo' cannot be combined with 'suffix'", "echo");
    suffix_ids = t.encode(*suffix, false, false);
  }
  const auto max_tokens = opt_int(body, "max_tokens", INT32_MIN, INT32_MAX);
  m.max_tokens_given = max_tokens.has_value();
  const bool add_special = opt_bool(body, "add_special_tokens").value_or(true);

  const json* pr = field(body, "prompt");
  if (!pr) throw_bad_request("'prompt' is required", "prompt");
  const Tokenizer& tok = *ctx.tokenizer;
  auto text_prompt = [&](const std::string& text) {
    MappedPrompt p;
    p.request = base;
    p.text = text;
    p.request.prompt = tok.encode(text, add_special, /*parse_special=*/true);
    if (p.request.prompt.empty() && tok.bos_id() >= 0) p.request.prompt.push_back(tok.bos_id());
    return p;
  };
  // Token ids, or llama-server's mixed list of ids and strings (each string tokenized in place, with
  // the special tokens only when it comes first).
  auto ids_prompt = [&](const json& arr) {
    MappedPrompt p;
    p.request = base;
    const bool mixed = std::any_of(arr.begin(), arr.end(), [](const json& v) { return v.is_string(); });
    p.request.prompt = !mixed ? token_prompt(arr, ctx)
                              : tokenize_mixed(arr, tok, add_special, /*parse_special=*/true,
                                               [&](const json& e) { return token_prompt(json::array({e}), ctx)[0]; });
    p.text = tok.decode(p.request.prompt);
    return p;
  };
  const char* shape_error =
      "'prompt' must be a string, an array of strings, an array of token ids (strings may be mixed in) or an "
      "array of those";
  auto one_prompt = [&](const json& given) -> MappedPrompt {
    const json* v = &given;
    if (v->is_object() && v->contains("prompt_string")) {  // llama-server's {"prompt_string", "multimodal_data"}
      if (v->contains("multimodal_data"))
        throw_bad_request("'multimodal_data': this server's models take text only", "prompt");
      v = &(*v)["prompt_string"];
    }
    if (v->is_string()) return text_prompt(v->get<std::string>());
    if (v->is_array()) return ids_prompt(*v);
    throw_bad_request(shape_error, "prompt");
  };
  if (pr->is_array() && pr->empty()) throw_bad_request("'prompt' must not be empty", "prompt");
  // An array holding a number is one prompt (ids, or ids and strings mixed); any other array is a list
  // of prompts.
  const bool list = pr->is_array() && std::none_of(pr->begin(), pr->end(), [](const json& v) { return v.is_number(); });
  if (!list) {
    m.prompts.push_back(one_prompt(*pr));
  } else {
    if (static_cast<int64_t>(pr->size()) > ctx.max_prompts)
      throw_bad_request(fmt::format("'prompt' has more than {} prompts", ctx.max_prompts), "prompt");
    for (const json& v : *pr) m.prompts.push_back(one_prompt(v));
  }
  if (!suffix_ids.empty())  // (an empty suffix: a plain completion)
    for (MappedPrompt& p : m.prompts) {
      std::vector<int32_t>& ids = p.request.prompt;
      const bool bos = !ids.empty() && ids.front() == tok.bos_id() && tok.bos_id() >= 0;
      std::vector<int32_t> fim;
      if (bos) fim.push_back(tok.bos_id());
      fim.push_back(tok.fim_pre_id());
      fim.insert(fim.end(), ids.begin() + (bos ? 1 : 0), ids.end());
      fim.push_back(tok.fim_suf_id());
      fim.insert(fim.end(), suffix_ids.begin(), suffix_ids.end());
      fim.push_back(tok.fim_mid_id());
      ids = std::move(fim);
    }
  for (MappedPrompt& p : m.prompts) finish_prompt(body, ctx, kind, max_tokens, p);
  return m;
}

Result<MappedRequest> map_chat_request(const json& body, const ServerContext& ctx, ApiError* err) {
  return guarded(
      [&]() -> MappedRequest {
        if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
        MappedRequest m;
        GenerateRequest base;
        map_common(body, ctx, ApiKind::Chat, base, m);
        m.logprobs = opt_bool(body, "logprobs").value_or(false);
        if (auto top = opt_int(body, "top_logprobs", 0, ctx.max_logprobs)) {
          if (!m.logprobs) throw_bad_request("'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
          m.top_logprobs = static_cast<int32_t>(*top);
        }
        if (m.logprobs) base.sampling.logprobs = m.top_logprobs;
        // max_completion_tokens replaces the deprecated max_tokens; either works.
        auto max_tokens = opt_int(body, "max_completion_tokens", INT32_MIN, INT32_MAX);
        if (!max_tokens) max_tokens = opt_int(body, "max_tokens", INT32_MIN, INT32_MAX);
        m.max_tokens_given = max_tokens.has_value();
        const bool add_special = opt_bool(body, "add_special_tokens").value_or(false);
        MappedPrompt p;
        p.request = base;
        p.text = render_messages(body, ctx);
        const auto tmpl_src = opt_string(body, "chat_template");
        m.tools = map_tools(body, ctx.tool_call_parser, tmpl_src ? *tmpl_src : ctx.chat_template->source(), p.request);
        p.request.prompt = tokenize_chat_prompt(p.text, *ctx.tokenizer, add_special);
        truncate_chat(body, ctx, max_tokens, add_special, p);
        finish_prompt(body, ctx, ApiKind::Chat, max_tokens, p);
        m.prompts.push_back(std::move(p));
        map_reasoning(body, ctx, m);  // last: it reads the rendered prompt and the constraint
        return m;
      },
      err);
}

Result<std::string> render_chat_prompt(const json& body, const ServerContext& ctx, ApiError* err) {
  try {
    return render_messages(body, ctx);
  } catch (const RequestError& e) {
    if (err) *err = e.error;
    return Error{e.error.message};
  } catch (const std::exception& e) {
    ApiError a = bad_request(std::string("Invalid request: ") + e.what());
    if (err) *err = a;
    return Error{a.message};
  }
}

}  // namespace tmill::server
