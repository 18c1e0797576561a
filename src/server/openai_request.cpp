// Request mapping shared by both endpoints (sampling, stop conditions, limits) and /v1/completions.
#include "server/openai_request.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include <fmt/format.h>

#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {
namespace detail {

namespace {
// OpenAI's code for prompts that do not fit the context.
[[noreturn]] void throw_context_error(std::string message, std::string param) {
  throw RequestError{bad_request(std::move(message), std::move(param), "context_length_exceeded")};
}
}  // namespace

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

void map_logit_bias(const json& body, const ServerContext& ctx, SamplingParams& sp) {
  const json* lb = field(body, "logit_bias");
  if (!lb) return;
  if (!lb->is_object()) throw_bad_request("'logit_bias' must be an object of token id -> bias", "logit_bias");
  if (lb->size() > 1024) throw_bad_request("'logit_bias' has more than 1024 entries", "logit_bias");
  for (auto it = lb->begin(); it != lb->end(); ++it) {
    const std::string& key = it.key();
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const long long id = digits ? std::strtoll(key.c_str(), nullptr, 10) : -1;
    if (id < 0 || id >= ctx.n_vocab)
      throw_bad_request(fmt::format("logit_bias key '{}' is not a token id in [0, {})", key, ctx.n_vocab), "logit_bias");
    if (!it.value().is_number()) throw_bad_request("logit_bias values must be numbers", "logit_bias");
    const double b = it.value().get<double>();
    if (!(b >= -100 && b <= 100)) throw_bad_request("logit_bias values must be between -100 and 100", "logit_bias");
    sp.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
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
      r.stop_token_ids.push_back(static_cast<int32_t>(as_int(v, "stop_token_ids", 0, ctx.n_vocab - 1)));
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
  m.n = static_cast<int32_t>(opt_int(body, "n", 1, ctx.max_n).value_or(1));
  if (auto best_of = opt_int(body, "best_of", 1, ctx.max_n); best_of && *best_of != m.n)
    throw_bad_request("'best_of' different from 'n' is not supported", "best_of");
  r.n = m.n;

  SamplingParams& sp = r.sampling;
  sp.temperature = static_cast<float>(opt_number(body, "temperature", 0, 1e6).value_or(1.0));
  if (auto top_p = opt_number(body, "top_p", 0, 1)) {
    if (*top_p <= 0) throw_bad_request("'top_p' must be in (0, 1]", "top_p");
    sp.top_p = static_cast<float>(*top_p);
  }
  const int64_t top_k = opt_int(body, "top_k", -1, INT32_MAX).value_or(0);
  sp.top_k = top_k <= 0 ? 0 : static_cast<int32_t>(top_k);
  sp.min_p = static_cast<float>(opt_number(body, "min_p", 0, 1).value_or(0));
  sp.presence_penalty = static_cast<float>(opt_number(body, "presence_penalty", -2, 2).value_or(0));
  sp.frequency_penalty = static_cast<float>(opt_number(body, "frequency_penalty", -2, 2).value_or(0));
  if (auto rp = opt_number(body, "repetition_penalty", 0, 1e6)) {
    if (*rp <= 0) throw_bad_request("'repetition_penalty' must be positive", "repetition_penalty");
    sp.repetition_penalty = static_cast<float>(*rp);
  }
  if (auto seed = opt_int(body, "seed", INT64_MIN, INT64_MAX)) sp.seed = static_cast<uint64_t>(*seed);
  map_logit_bias(body, ctx, sp);
  map_stop(body, ctx, r);

  r.ignore_eos = opt_bool(body, "ignore_eos").value_or(false);
  r.min_tokens = static_cast<int32_t>(opt_int(body, "min_tokens", 0, INT32_MAX).value_or(0));
  r.skip_special_tokens = opt_bool(body, "skip_special_tokens").value_or(true);
  r.include_stop_str_in_output = opt_bool(body, "include_stop_str_in_output").value_or(false);
  r.priority = static_cast<int32_t>(opt_int(body, "priority", INT32_MIN, INT32_MAX).value_or(0));
  if (r.priority != 0 && !ctx.priority_scheduling)
    throw_bad_request("'priority' needs the server to run with --scheduling-policy priority", "priority");
  (void)opt_string(body, "user");  // accepted, type-checked, unused
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object()) throw_bad_request("'response_format' must be an object", "response_format");
    auto type = opt_string(*rf, "type");
    if (type && *type != "text")
      throw_bad_request(fmt::format("response_format type '{}' is not supported (only 'text')", *type), "response_format");
  }
  r.queue_timeout_s = ctx.queue_timeout_s;
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
  if (len >= ctx.max_model_len)
    throw_context_error(fmt::format("This model's maximum context length is {} tokens. However, your request has {} "
                                    "input tokens. Please reduce the length of the {} (or set truncate_prompt_tokens).",
                                    ctx.max_model_len, len, what),
                        what);
  const int64_t room = ctx.max_model_len - len;
  int64_t mt = 0;
  if (max_tokens) {
    mt = *max_tokens;
    if (len + mt > ctx.max_model_len)
      throw_context_error(fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                                      "tokens ({} in the {}, {} in the completion). Please reduce the length of the {} "
                                      "or completion.",
                                      ctx.max_model_len, len + mt, len, what, mt, what),
                          kind == ApiKind::Chat && field(body, "max_completion_tokens") ? "max_completion_tokens"
                                                                                        : "max_tokens");
  } else if (kind == ApiKind::Completion) {
    mt = std::min<int64_t>(16, room);  // OpenAI's documented default for /v1/completions
  } else {
    mt = room;  // chat: the rest of the context (as vLLM), capped by --max-tokens-default
    if (ctx.max_tokens_default > 0) mt = std::min<int64_t>(mt, ctx.max_tokens_default);
  }
  p.request.max_tokens = static_cast<int32_t>(mt);
  if (p.request.min_tokens > p.request.max_tokens)
    throw_bad_request(fmt::format("'min_tokens' ({}) must not exceed max_tokens ({})", p.request.min_tokens,
                                  p.request.max_tokens),
                      "min_tokens");
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
    ids.push_back(static_cast<int32_t>(as_int(v, "prompt", 0, ctx.n_vocab - 1)));
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
  return guarded(
      [&]() -> MappedRequest {
        if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
        MappedRequest m;
        GenerateRequest base;
        map_common(body, ctx, ApiKind::Completion, base, m);
        m.echo = opt_bool(body, "echo").value_or(false);
        if (auto lp = opt_int(body, "logprobs", 0, ctx.max_logprobs)) {
          m.logprobs = true;
          m.top_logprobs = static_cast<int32_t>(*lp);
          base.sampling.logprobs = m.top_logprobs;
        }
        if (m.echo && m.logprobs)
          throw_bad_request("'echo' with 'logprobs' needs prompt logprobs, which this server does not compute",
                            "logprobs");
        if (auto suffix = opt_string(body, "suffix"); suffix && !suffix->empty())
          throw_bad_request("'suffix' is not supported", "suffix");
        const auto max_tokens = opt_int(body, "max_tokens", 1, INT32_MAX);
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
        auto ids_prompt = [&](const json& arr) {
          MappedPrompt p;
          p.request = base;
          p.request.prompt = token_prompt(arr, ctx);
          p.text = tok.decode(p.request.prompt);
          return p;
        };
        const char* shape_error =
            "'prompt' must be a string, an array of strings, an array of token ids or an array of token-id arrays";
        if (pr->is_string()) {
          m.prompts.push_back(text_prompt(pr->get<std::string>()));
        } else if (pr->is_array()) {
          if (pr->empty()) throw_bad_request("'prompt' must not be empty", "prompt");
          const json& first = (*pr)[0];
          if (first.is_number()) {
            m.prompts.push_back(ids_prompt(*pr));
          } else {
            if (static_cast<int64_t>(pr->size()) > ctx.max_prompts)
              throw_bad_request(fmt::format("'prompt' has more than {} prompts", ctx.max_prompts), "prompt");
            for (const json& v : *pr) {
              if (first.is_string() && v.is_string()) m.prompts.push_back(text_prompt(v.get<std::string>()));
              else if (first.is_array() && v.is_array()) m.prompts.push_back(ids_prompt(v));
              else throw_bad_request(shape_error, "prompt");
            }
          }
        } else {
          throw_bad_request(shape_error, "prompt");
        }
        for (MappedPrompt& p : m.prompts) finish_prompt(body, ctx, ApiKind::Completion, max_tokens, p);
        return m;
      },
      err);
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
        auto max_tokens = opt_int(body, "max_completion_tokens", 1, INT32_MAX);
        if (!max_tokens) max_tokens = opt_int(body, "max_tokens", 1, INT32_MAX);
        m.max_tokens_given = max_tokens.has_value();
        const bool add_special = opt_bool(body, "add_special_tokens").value_or(false);
        MappedPrompt p;
        p.request = base;
        p.text = render_messages(body, ctx);
        p.request.prompt = tokenize_chat(p.text, *ctx.tokenizer, add_special);
        finish_prompt(body, ctx, ApiKind::Chat, max_tokens, p);
        m.prompts.push_back(std::move(p));
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
